//go:build ofi

package ofi

/*
#cgo LDFLAGS: -lfabric
#include <stdlib.h>
#include "gofi.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/gompj/gompj/rdma"
)

// Built reports whether this build has the ofi provider (the build tag ofi).
const Built = true

// Defaults for the zero values of Options.
const (
	DefaultHeartbeat    = time.Second
	DefaultLossTimeout  = 10 * time.Second
	DefaultCloseTimeout = 2 * time.Second
)

// Options choose the fabric and shape the endpoints of a Provider.
type Options struct {
	// Provider is libfabric's provider name ("verbs;ofi_rxm", "efa", "cxi", "psm3", "tcp;ofi_rxm", "shm", ...).
	// Empty: FI_PROVIDER's choice, else the first provider libfabric lists that reaches other hosts.
	Provider string
	// Domain names the domain (NIC, or network interface for tcp) to use; empty: any.
	Domain string
	// Source is a local address for fabrics addressed by sockets (tcp, verbs): the endpoint listens there. Empty,
	// or an address the fabric does not have: the provider's choice.
	Source string
	// API is "tagged" (FI_TAGGED), "msg" (FI_MSG with remote CQ data) or empty: tagged where the provider offers it.
	API string
	// NoRMA opens the endpoint without FI_RMA even where the provider offers it (the device then streams
	// rendezvous data through messages); NoInject reports no inject (every message is a Send).
	NoRMA, NoInject bool
	// Heartbeat is how often an endpoint tells each peer it is alive, LossTimeout how long a silent peer has
	// before it is reported lost, CloseTimeout how long Close waits for its goodbyes to leave.
	Heartbeat, LossTimeout, CloseTimeout time.Duration
}

// Provider is the rdma provider over libfabric.
type Provider struct {
	opts Options
}

// New returns the provider; nothing is opened until Open.
func New(o Options) *Provider {
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.LossTimeout <= 0 {
		o.LossTimeout = DefaultLossTimeout
	}
	if o.CloseTimeout <= 0 {
		o.CloseTimeout = DefaultCloseTimeout
	}
	return &Provider{opts: o}
}

// Name implements rdma.Provider.
func (p *Provider) Name() string { return "ofi" }

// Version is the version of the libfabric library loaded.
func Version() string {
	v := uint32(C.fi_version())
	return fmt.Sprintf("%d.%d", v>>16, v&0xffff)
}

// Error is a libfabric error: its code (FI_E*, as positive errno values) and, for a failed operation, the
// provider's own code and words (fi_cq_strerror).
type Error struct {
	Code     int
	ProvCode int
	Detail   string
}

func (e *Error) Error() string {
	s := C.GoString(C.gofi_strerror(C.int(e.Code)))
	if e.ProvCode != 0 {
		s += fmt.Sprintf(" (provider error %d: %s)", e.ProvCode, e.Detail)
	}
	return s
}

func fiErr(ret C.ssize_t) error {
	code := int(ret)
	if code < 0 {
		code = -code
	}
	return &Error{Code: code}
}

// explicit reports whether the user named the provider (Options or FI_PROVIDER): then shm is a choice too.
func (p *Provider) explicit() bool {
	return p.opts.Provider != "" || os.Getenv("FI_PROVIDER") != ""
}

// choice is the fabric chosen for an endpoint: one fi_info of a list that the caller frees.
type choice struct {
	list   *C.struct_fi_info
	info   *C.struct_fi_info
	tagged bool
	rma    bool
}

func freeChoice(ch *choice) { C.fi_freeinfo(ch.list) }

// getinfo asks libfabric for RDM fabrics; nil without error when none matches.
func (p *Provider) getinfo(node string, tagged, rma, ordered bool) (*C.struct_fi_info, error) {
	var cprov, cnode *C.char
	if p.opts.Provider != "" {
		cprov = C.CString(p.opts.Provider)
		defer C.free(unsafe.Pointer(cprov))
	}
	if node != "" {
		cnode = C.CString(node)
		defer C.free(unsafe.Pointer(cnode))
	}
	var list *C.struct_fi_info
	ret := C.gofi_getinfo(cprov, cnode, cbool(tagged), cbool(rma), cbool(ordered), &list)
	switch {
	case ret == -C.FI_ENODATA:
		return nil, nil
	case ret != 0:
		return nil, &rdma.OpError{Call: "fi_getinfo", Node: -1, Err: fiErr(C.ssize_t(ret))}
	}
	return list, nil
}

func sockaddr(f C.uint32_t) bool {
	switch f {
	case C.FI_SOCKADDR, C.FI_SOCKADDR_IN, C.FI_SOCKADDR_IN6, C.FI_SOCKADDR_IB:
		return true
	}
	return false
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// acceptable filters libfabric's answers: the domain asked for, and no shm unless the user chose it (it cannot
// reach another host).
func (p *Provider) acceptable(fi *C.struct_fi_info) bool {
	prov := C.GoString(fi.fabric_attr.prov_name)
	if !p.explicit() && strings.HasPrefix(prov, "shm") {
		return false
	}
	if p.opts.Domain != "" && C.GoString(fi.domain_attr.name) != p.opts.Domain {
		return false
	}
	return true
}

// choose finds the fabric: tagged before msg, RMA before none, ordered before unordered, on Source before
// anywhere; the first acceptable answer of the first query that has one.
func (p *Provider) choose() (*choice, error) {
	apis := []bool{true, false}
	switch p.opts.API {
	case "tagged":
		apis = []bool{true}
	case "msg":
		apis = []bool{false}
	case "":
	default:
		return nil, fmt.Errorf("ofi: API %q (tagged or msg)", p.opts.API)
	}
	rmas := []bool{true, false}
	if p.opts.NoRMA {
		rmas = []bool{false}
	}
	nodes := []string{""}
	if p.opts.Source != "" {
		nodes = []string{p.opts.Source, ""}
	}
	for _, tagged := range apis {
		for _, rma := range rmas {
			for _, ordered := range []bool{true, false} {
				for _, node := range nodes {
					list, err := p.getinfo(node, tagged, rma, ordered)
					if err != nil {
						return nil, err
					}
					for fi := list; fi != nil; fi = fi.next {
						if !p.acceptable(fi) || node != "" && !sockaddr(fi.addr_format) {
							// Source is an address for socket fabrics; shm would take it as the name of its
							// segment, the same in every process.
							continue
						}
						if tagged && p.opts.API == "" && strings.HasPrefix(C.GoString(fi.fabric_attr.prov_name), "shm") {
							// libfabric 1.17's shm loses tagged messages that arrive before a receive is posted
							// for them (TestConcurrentSenders): it gets FI_MSG unless asked for tags.
							break
						}
						return &choice{list: list, info: fi, tagged: tagged, rma: rma}, nil
					}
					if list != nil {
						C.fi_freeinfo(list)
					}
				}
			}
		}
	}
	what := "any provider"
	if p.opts.Provider != "" {
		what = "provider " + p.opts.Provider
	} else if fp := os.Getenv("FI_PROVIDER"); fp != "" {
		what = "FI_PROVIDER=" + fp
	}
	if p.opts.Domain != "" {
		what += " on domain " + p.opts.Domain
	}
	return nil, fmt.Errorf("ofi: libfabric %s offers no reliable datagram endpoint (FI_EP_RDM with FI_TAGGED or FI_MSG, thread safe) for %s", Version(), what)
}

// Fabric is one of libfabric's answers, for `gompj info`.
type Fabric struct {
	Provider, Fabric, Domain string
	Tagged, RMA              bool
}

// Fabrics lists the RDM fabrics libfabric offers here (FI_PROVIDER applies), each provider and domain once.
func Fabrics() ([]Fabric, error) {
	p := New(Options{})
	var out []Fabric
	for _, tagged := range []bool{true, false} {
		list, err := p.getinfo("", tagged, false, false)
		if err != nil {
			return nil, err
		}
		for fi := list; fi != nil; fi = fi.next {
			f := Fabric{Provider: C.GoString(fi.fabric_attr.prov_name), Fabric: C.GoString(fi.fabric_attr.name),
				Domain: C.GoString(fi.domain_attr.name), Tagged: fi.caps&C.FI_TAGGED != 0, RMA: fi.caps&C.FI_RMA != 0}
			i := slices.IndexFunc(out, func(g Fabric) bool {
				return g.Provider == f.Provider && g.Domain == f.Domain && g.Fabric == f.Fabric
			})
			if i < 0 {
				out = append(out, f)
			}
		}
		if list != nil {
			C.fi_freeinfo(list)
		}
	}
	return out, nil
}

// Summary describes libfabric and its fabrics in a few lines, for `gompj info`.
func Summary() string {
	fs, err := Fabrics()
	if err != nil {
		return fmt.Sprintf("libfabric %s: %v", Version(), err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "libfabric %s", Version())
	if fp := os.Getenv("FI_PROVIDER"); fp != "" {
		fmt.Fprintf(&b, ", FI_PROVIDER=%s", fp)
	}
	if len(fs) == 0 {
		b.WriteString(": no reliable datagram (FI_EP_RDM) fabric here")
		return b.String()
	}
	b.WriteString(", FI_EP_RDM fabrics:")
	for _, f := range fs {
		var caps []string
		if f.Tagged {
			caps = append(caps, "tagged")
		}
		if f.RMA {
			caps = append(caps, "rma")
		}
		fmt.Fprintf(&b, "\n    %-16s domain %-10s fabric %-20s %s", f.Provider, f.Domain, f.Fabric, strings.Join(caps, ","))
	}
	return b.String()
}

// Status is one line for `gompj info`: libfabric's version, the RDM providers it offers here, and the fabric an
// endpoint would take now (FI_PROVIDER applies).
func Status() string {
	fs, err := Fabrics()
	if err != nil {
		return fmt.Sprintf("libfabric %s: %v", Version(), err)
	}
	var provs []string
	for _, f := range fs {
		if !slices.Contains(provs, f.Provider) {
			provs = append(provs, f.Provider)
		}
	}
	s := fmt.Sprintf("libfabric %s, FI_EP_RDM providers here: %s", Version(), strings.Join(provs, " "))
	if len(provs) == 0 {
		s = fmt.Sprintf("libfabric %s: no FI_EP_RDM provider here", Version())
	}
	p := New(Options{})
	ch, err := p.choose()
	if err != nil {
		return s + "; " + err.Error()
	}
	defer freeChoice(ch)
	s += fmt.Sprintf("; -dev rdma takes %s on %s", C.GoString(ch.info.fabric_attr.prov_name), C.GoString(ch.info.domain_attr.name))
	if fp := os.Getenv("FI_PROVIDER"); fp != "" {
		s += " (FI_PROVIDER=" + fp + ")"
	}
	return s
}

var errClosed = errors.New("endpoint closed")

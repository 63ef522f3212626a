package node

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/node/bootstrap"
)

// Device names. "shm" is the host device: node processes on one host share memory (rdma over its shm provider);
// the other two are the inter-host devices that -dev and GOMPJ_DEV choose from.
const (
	DevTCP  = "tcp"
	DevRDMA = "rdma"
	DevSHM  = "shm"
)

// GOMPJ_BIND's values (Config.Bind).
const (
	BindNone  = "none"
	BindCores = "cores"
)

// openSpec is what a device's opener gets: the job's configuration and shape.
type openSpec struct {
	cfg    Config
	layout Layout
}

// opener opens this node's transport of one device (listening, not started).
type opener func(s *openSpec) (device.Transport, error)

// deviceEntry is a device known to this build: built (open set) or not (why says how to get it).
type deviceEntry struct {
	name    string
	summary string
	open    opener
	why     string              // for a device that is not built: what to do
	status  func(Config) string // for a built device: how it works here (probed on this host), or nil
}

// registry holds the devices of this build. The files that register them are chosen by build tags (Linux for
// tcp and shm, the ofi tag for rdma), so the registry itself is portable.
type registry struct {
	entries []deviceEntry
}

var devices registry

func (r *registry) add(e deviceEntry) {
	for i := range r.entries {
		if r.entries[i].name == e.name {
			r.entries[i] = e
			return
		}
	}
	r.entries = append(r.entries, e)
}

func (r *registry) lookup(name string) (deviceEntry, bool) {
	for _, e := range r.entries {
		if e.name == name {
			return e, true
		}
	}
	return deviceEntry{}, false
}

// DeviceInfo describes a device of this build for `gompj info`.
type DeviceInfo struct {
	Name, Summary string
	Built         bool
	Why           string // for a device that is not built
	Status        string // for a built one, how it works on this host ("" if there is nothing to say)
}

// Devices lists the devices known to this build; cfg says how they would be configured (the host device's CMA).
func Devices(cfg Config) []DeviceInfo {
	var out []DeviceInfo
	for _, e := range devices.entries {
		d := DeviceInfo{Name: e.name, Summary: e.summary, Built: e.open != nil, Why: e.why}
		if e.status != nil && d.Built {
			d.Status = e.status(cfg)
		}
		out = append(out, d)
	}
	return out
}

// CheckDevice reports whether the inter-host device name can be used by this build.
func CheckDevice(name string) error {
	if name != DevTCP && name != DevRDMA {
		return fmt.Errorf("unknown device %q (tcp or rdma)", name)
	}
	e, ok := devices.lookup(name)
	switch {
	case !ok && NetworkMissing() != nil:
		return NetworkMissing()
	case !ok:
		return fmt.Errorf("device %q is not available on this system", name)
	case e.open == nil:
		return fmt.Errorf("device %q: %s", name, e.why)
	}
	return nil
}

// route says which device serves each peer node.
type route struct {
	self   int
	names  []string // by node; "" for this node
	hosts  []string // host identity of every node
	layout Layout
}

// plan routes every peer of node self: the host device for node processes on the same host (unless hostSHM is off
// or either end has no host device), the inter-host device for the others. Every node computes the same plan
// from the same table, so both ends of a pair agree.
func plan(self int, table []bootstrap.Endpoint, inter string, hostSHM bool, layout Layout) (*route, error) {
	r := &route{self: self, names: make([]string, len(table)), hosts: make([]string, len(table)), layout: layout}
	me := table[self]
	for n, ep := range table {
		r.hosts[n] = ep.Host
		if n == self {
			continue
		}
		_, meSHM := me.Addrs[DevSHM]
		_, itSHM := ep.Addrs[DevSHM]
		if hostSHM && ep.Host == me.Host && meSHM && itSHM {
			r.names[n] = DevSHM
			continue
		}
		if _, ok := ep.Addrs[inter]; !ok {
			return nil, fmt.Errorf("node %d did not open the %s device (do all nodes use the same -dev / GOMPJ_DEV?)", n, inter)
		}
		r.names[n] = inter
	}
	return r, nil
}

// used lists the devices the plan uses, the host device first (it is the cheapest to poll).
func (r *route) used() []string {
	var out []string
	for _, n := range r.names {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.SortStableFunc(out, func(a, b string) int {
		switch {
		case a == b:
			return 0
		case a == DevSHM:
			return -1
		case b == DevSHM:
			return 1
		}
		return strings.Compare(a, b)
	})
	return out
}

// addrs returns, for device name, every node's blob if the plan routes it there, else nil.
func (r *route) addrs(name string, table []bootstrap.Endpoint) [][]byte {
	out := make([][]byte, len(table))
	for n, dn := range r.names {
		if dn == name {
			out[n] = table[n].Addrs[name]
		}
	}
	return out
}

// sameHost counts the ranks on nodes whose host is this node's.
func (r *route) sameHost() int {
	n := 0
	for i, h := range r.hosts {
		if h == r.hosts[r.self] {
			lo, hi := r.layout.Range(i)
			n += hi - lo
		}
	}
	return n
}

// sameHostIndex is this node's place among the node processes of its host, in node order.
func (r *route) sameHostIndex() int {
	n := 0
	for i := 0; i < r.self; i++ {
		if r.hosts[i] == r.hosts[r.self] {
			n++
		}
	}
	return n
}

// sameHostNodes counts the node processes whose host is this node's, itself included.
func (r *route) sameHostNodes() int {
	n := 0
	for _, h := range r.hosts {
		if h == r.hosts[r.self] {
			n++
		}
	}
	return n
}

// describe is the route table for `gompj info` and World.Routes: "node 1 (ranks 2-3): shm (CMA single copy)".
func (r *route) describe(trs map[string]device.Transport) string {
	type group struct {
		dev   string
		nodes []int
	}
	var gs []group
	for n, dn := range r.names {
		if dn == "" {
			continue
		}
		i := slices.IndexFunc(gs, func(g group) bool { return g.dev == dn })
		if i < 0 {
			gs = append(gs, group{dev: dn})
			i = len(gs) - 1
		}
		gs[i].nodes = append(gs[i].nodes, n)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s on host %s", r.layout.Describe(r.self), shortHost(r.hosts[r.self]))
	for _, g := range gs {
		what := g.dev
		if d, ok := trs[g.dev].(device.Describer); ok {
			what = d.Describe()
		}
		fmt.Fprintf(&b, "\n  %-8s nodes %s: %s", g.dev, spans(g.nodes), what)
	}
	return b.String()
}

// shortHost shortens a host identity for messages: its first field (the host name).
func shortHost(h string) string {
	name, _, _ := strings.Cut(h, "/")
	return name
}

// spans writes ascending ids (nodes, CPUs) as ranges, as Linux writes CPU lists: "1-3,5".
func spans(ns []int) string {
	var b strings.Builder
	for i := 0; i < len(ns); {
		j := i
		for j+1 < len(ns) && ns[j+1] == ns[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if j > i {
			fmt.Fprintf(&b, "%d-%d", ns[i], ns[j])
		} else {
			fmt.Fprintf(&b, "%d", ns[i])
		}
		i = j + 1
	}
	return b.String()
}

// openDevices opens the inter-host device and, unless GOMPJ_HOST_SHM=0 or the build lacks it, the host device.
// The inter-host device is needed only if some peer is on another host, which the bootstrap will tell; it is
// opened anyway (a listening socket) and closed if unused. A host device that fails to open is left out with a
// note: the nodes then route their same-host peers through the network, and say so.
func openDevices(s *openSpec) (map[string]device.Transport, error) {
	trs := map[string]device.Transport{}
	inter := s.cfg.Dev
	if err := CheckDevice(inter); err != nil {
		return nil, err
	}
	e, _ := devices.lookup(inter)
	tr, err := e.open(s)
	if err != nil {
		return nil, fmt.Errorf("%s device: %w", inter, err)
	}
	trs[inter] = tr
	if !s.cfg.NoHostSHM {
		if e, ok := devices.lookup(DevSHM); ok && e.open != nil {
			tr, err := e.open(s)
			if err != nil {
				fmt.Fprintf(os.Stderr, "gompj: node %d: the shared-memory device cannot open (%v); same-host peers go through %s\n",
					s.cfg.NodeID, err, inter)
			} else {
				trs[DevSHM] = tr
			}
		}
	}
	return trs, nil
}

// closeAll closes transports (errors are of no interest: the job failed already, or they were unused).
func closeAll(trs map[string]device.Transport, keep func(string) bool) {
	for name, tr := range trs {
		if keep == nil || !keep(name) {
			tr.Close()
			delete(trs, name)
		}
	}
}

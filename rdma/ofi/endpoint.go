//go:build ofi

package ofi

/*
#include "gofi.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gompj/gompj/rdma"
)

const notConnected = math.MaxUint64

// Kinds of operation a context slot holds.
const (
	opRecv  uint8 = iota + 1 // a posted receive (the device's)
	opSend                   // the device's Send
	opWrite                  // the device's Write
	opRead                   // the device's Read
	opCtl                    // a control message sent with a completion (goodbye; hello and heartbeat without inject)
	opBeat                   // a heartbeat receive of the endpoint's own (FI_TAGGED)
)

// beatFlag marks heartbeats' tags with FI_TAGGED: they land in receives of their own, so that a peer is heard
// even while the device holds every receive buffer it posted. The device's receives ignore every other bit.
const beatFlag = 1 << 32

// ignoreData is the device's receives' tag mask: any word, no heartbeat.
const ignoreData = ^uint64(beatFlag)

// slot is the Go side of one operation in flight; its C side is the FI_CONTEXT2 at the same index, whose address
// is the operation's context.
type slot struct {
	op     uint8
	pinned bool
	node   int32
	ctx    uint64
	buf    unsafe.Pointer // a receive's buffer, to post it again after a control message
	blen   int
	desc   unsafe.Pointer
	pin    runtime.Pinner // a buffer posted without a registration, pinned until the completion
}

// peer is the endpoint's view of one node.
type peer struct {
	fiaddr atomic.Uint64 // fi_addr_t, notConnected until Connect
	gone   atomic.Bool   // lost, or closed its endpoint: sends to it fail
	sent   atomic.Uint64 // the device's messages sent to it (announced in the goodbye)

	// Owned by the poller (pollMu).
	recvd     uint64 // the device's messages received from it
	lastHeard time.Duration
	byeGot    bool
	byeCount  uint64
	byeAt     time.Duration
	ackGot    bool // our goodbye was taken
	ctlBusy   bool // a control message with a completion is in flight to it (its C buffer is in use)
	reported  bool // OpPeerLost or OpPeerClosed delivered

	// Under endpoint.peerMu (Ready reads them).
	connected bool
	helloSent bool
	helloGot  bool
	helloErr  error
}

type endpoint struct {
	opts   Options
	c      *C.gofi_ep
	node   int
	nodes  int
	tagged bool
	caps   rdma.Caps
	mrMode uint64
	self   addrInfo
	addr   []byte
	desc   string
	digest [8]byte
	hello  []byte
	t0     time.Time

	// guard: every call into C holds it for reading; Close frees the C side holding it for writing.
	guard   sync.RWMutex
	closed  atomic.Bool
	closing atomic.Bool
	killed  atomic.Bool // abandon: as a killed process, silent from now on

	slotBase uintptr
	slotSize uintptr
	slotMu   sync.Mutex
	free     []int32
	slots    []slot

	peers []peer

	// The poller's state (pollMu): Poll, Ready's polling and Close's.
	pollMu    sync.Mutex
	stash     []rdma.Completion // completions polled outside Poll (Ready), in order
	hasStash  atomic.Bool
	events    []rdma.Completion // peer events raised while polling, delivered after the completions before them
	pending   []int             // nodes still owed a hello
	acksOwed  []int             // nodes whose goodbye this node has not acknowledged yet (FI_EAGAIN)
	nextBeat  time.Duration
	byesOut   int
	pollErr   error
	scratch   []rdma.Completion
	dropped   atomic.Int64 // messages from no known node, dropped
	waitable  atomic.Bool
	wakeCh    chan struct{}
	peerMu    sync.Mutex
	readyCh   chan struct{} // closed and replaced when a peer's hello state changes
	mrMu      sync.Mutex
	mrs       map[*mr]struct{}
	closeOnce sync.Once
	closeErr  error
}

// Open implements rdma.Provider: it chooses the fabric and opens this node's endpoint.
func (p *Provider) Open(cfg rdma.EndpointConfig) (rdma.Endpoint, error) {
	if cfg.Nodes <= 0 || cfg.Nodes > MaxNodes || cfg.Node < 0 || cfg.Node >= cfg.Nodes {
		return nil, fmt.Errorf("ofi: node %d of %d (at most %d nodes)", cfg.Node, cfg.Nodes, MaxNodes)
	}
	ch, err := p.choose()
	if err != nil {
		return nil, err
	}
	defer freeChoice(ch)
	var c *C.gofi_ep
	var msg [256]C.char
	const cqcap = 64
	if ret := C.gofi_open(ch.info, cbool(ch.tagged), C.size_t(cfg.Nodes), cqcap, C.size_t(cfg.Nodes), &c, &msg[0], C.size_t(len(msg))); ret != 0 {
		return nil, fmt.Errorf("ofi: opening an endpoint of %s: %s", C.GoString(ch.info.fabric_attr.prov_name), C.GoString(&msg[0]))
	}
	e := &endpoint{opts: p.opts, c: c, node: cfg.Node, nodes: cfg.Nodes, tagged: ch.tagged, t0: time.Now(),
		peers: make([]peer, cfg.Nodes), wakeCh: make(chan struct{}, 1), readyCh: make(chan struct{}),
		mrs: map[*mr]struct{}{}, scratch: make([]rdma.Completion, cqcap)}
	e.digest = secretDigest(cfg.Secret)
	e.hello = helloMsg(e.digest)
	e.waitable.Store(c.waitable != 0)
	for i := range e.peers {
		e.peers[i].fiaddr.Store(notConnected)
	}
	e.slotBase = uintptr(unsafe.Pointer(c.slots))
	e.slotSize = unsafe.Sizeof(C.struct_fi_context2{})
	e.slots = make([]slot, int(c.nslots))
	e.free = make([]int32, 0, len(e.slots))
	for i := len(e.slots) - 1; i >= 0; i-- {
		e.free = append(e.free, int32(i))
	}
	e.fillCaps(ch)
	name, err := e.getname()
	if err != nil {
		C.gofi_close(c)
		return nil, err
	}
	e.self = addrInfo{tagged: ch.tagged, format: uint32(c.info.addr_format), prov: C.GoString(c.info.fabric_attr.prov_name), name: name}
	if e.addr, err = encodeAddr(e.self); err != nil {
		C.gofi_close(c)
		return nil, err
	}
	e.desc = e.describe()
	if e.tagged {
		if err := e.postBeats(); err != nil {
			C.gofi_close(c)
			return nil, fmt.Errorf("ofi: posting heartbeat receives: %w", err)
		}
	}
	return e, nil
}

func (e *endpoint) fillCaps(ch *choice) {
	info := e.c.info
	e.mrMode = uint64(info.domain_attr.mr_mode)
	maxMsg := uint64(info.ep_attr.max_msg_size)
	c := rdma.Caps{
		MaxMsg:     int(min(maxMsg, 1<<30)),
		InjectSize: int(min(uint64(info.tx_attr.inject_size), 4096)),
		RecvDepth:  int(info.rx_attr.size),
		// The device needs messages to complete in order, not only to be matched in order (FI_ORDER_SAS):
		// tcp;ofi_rxm matches in order but completes its own rendezvous (messages over its 16 KiB buffers)
		// after the eager messages behind them (comp_order FI_ORDER_NONE).
		Ordered: uint64(info.tx_attr.msg_order)&C.FI_ORDER_SAS != 0 &&
			uint64(info.rx_attr.msg_order)&C.FI_ORDER_SAS != 0 &&
			uint64(info.rx_attr.comp_order)&C.FI_ORDER_STRICT != 0,
		RMA:      ch.rma,
		VirtAddr: e.mrMode&C.FI_MR_VIRT_ADDR != 0,
		LocalMR:  e.mrMode&C.FI_MR_LOCAL != 0,
		// Registration is a table entry for the software providers; the modes below are those of NICs that pin
		// pages and translate addresses.
		RegisterCost: e.mrMode&(C.FI_MR_LOCAL|C.FI_MR_ALLOCATED|C.FI_MR_PROV_KEY|C.FI_MR_ENDPOINT) != 0,
	}
	if maxMsg < 1<<40 {
		c.MaxRMA = int(maxMsg)
	}
	if strings.HasSuffix(e.self.prov, "ofi_rxm") || strings.HasSuffix(C.GoString(info.fabric_attr.prov_name), "ofi_rxm") {
		// ofi_rxm sends a message eagerly when it fits its buffers (FI_OFI_RXM_BUFFER_SIZE, 16 KiB by default)
		// and adds a rendezvous of its own beyond: the device's eager messages, its header included, stay under.
		c.EagerLimit = rxmBuffer() - eagerHeadroom
	}
	if e.opts.NoInject {
		c.InjectSize = 0
	}
	e.caps = c
}

// eagerHeadroom is room for the device's header (72 bytes today) under a provider's buffer size.
const eagerHeadroom = 128

// rxmBuffer is ofi_rxm's buffer size: FI_OFI_RXM_BUFFER_SIZE, else its default.
func rxmBuffer() int {
	if n, err := strconv.Atoi(os.Getenv("FI_OFI_RXM_BUFFER_SIZE")); err == nil && n > 2*eagerHeadroom {
		return n
	}
	return 16 << 10
}

func (e *endpoint) getname() ([]byte, error) {
	buf := make([]byte, 256)
	for {
		n := C.size_t(len(buf))
		ret := C.gofi_getname(e.c, unsafe.Pointer(&buf[0]), &n)
		switch {
		case ret == -C.FI_ETOOSMALL && int(n) > len(buf) && int(n) <= maxAddr:
			buf = make([]byte, int(n))
			continue
		case ret != 0:
			return nil, &rdma.OpError{Call: "fi_getname", Node: -1, Err: fiErr(C.ssize_t(ret))}
		case n == 0 || int(n) > len(buf):
			return nil, fmt.Errorf("ofi: fi_getname gave a name of %d bytes", n)
		}
		return buf[:n], nil
	}
}

func (e *endpoint) describe() string {
	info := e.c.info
	var modes []string
	for _, m := range []struct {
		bit  uint64
		name string
	}{{C.FI_MR_LOCAL, "local"}, {C.FI_MR_VIRT_ADDR, "virt_addr"}, {C.FI_MR_ALLOCATED, "allocated"},
		{C.FI_MR_PROV_KEY, "prov_key"}, {C.FI_MR_ENDPOINT, "endpoint"}} {
		if e.mrMode&m.bit != 0 {
			modes = append(modes, m.name)
		}
	}
	mr := "none"
	if len(modes) > 0 {
		mr = strings.Join(modes, "|")
	}
	feat := []string{apiName(e.tagged)}
	if e.caps.RMA {
		feat = append(feat, "FI_RMA")
	}
	if e.caps.Ordered {
		feat = append(feat, "ordered")
	}
	return fmt.Sprintf("libfabric %s %s on %s (fabric %s): %s, inject %d B, mr_mode %s", Version(), e.self.prov,
		C.GoString(info.domain_attr.name), C.GoString(info.fabric_attr.name), strings.Join(feat, ", "), e.caps.InjectSize, mr)
}

// Describe says which fabric the endpoint runs on, for `gompj info` and the routes of a job.
func (e *endpoint) Describe() string { return e.desc }

func (e *endpoint) Caps() rdma.Caps { return e.caps }

func (e *endpoint) Address() []byte { return slices.Clone(e.addr) }

func (e *endpoint) now() time.Duration { return time.Since(e.t0) }

// enter holds the endpoint open for a call into C.
func (e *endpoint) enter() bool {
	e.guard.RLock()
	if e.closed.Load() || e.killed.Load() {
		e.guard.RUnlock()
		return false
	}
	return true
}

func (e *endpoint) leave() { e.guard.RUnlock() }

func (e *endpoint) call(name string) string {
	if e.tagged {
		switch name {
		case "send":
			return "fi_tsend"
		case "recv":
			return "fi_trecv"
		case "inject":
			return "fi_tinject"
		}
	}
	switch name {
	case "send":
		return "fi_senddata"
	case "recv":
		return "fi_recv"
	case "inject":
		return "fi_injectdata"
	}
	return name
}

func (e *endpoint) Connect(node int, addr []byte) error {
	if node < 0 || node >= e.nodes || node == e.node {
		return fmt.Errorf("ofi: connecting node %d (this is node %d of %d)", node, e.node, e.nodes)
	}
	a, err := decodeAddr(addr)
	if err == nil {
		err = e.self.compatible(a)
	}
	if err != nil {
		return fmt.Errorf("ofi: node %d's address: %w", node, err)
	}
	p := &e.peers[node]
	// Lock order: pollMu, then peerMu (the poller takes peerMu when a hello arrives).
	e.pollMu.Lock()
	defer e.pollMu.Unlock()
	e.peerMu.Lock()
	defer e.peerMu.Unlock()
	if p.connected {
		return fmt.Errorf("ofi: node %d connected twice", node)
	}
	if !e.enter() {
		return &rdma.OpError{Call: "fi_av_insert", Node: node, Err: errClosed}
	}
	var fa C.fi_addr_t
	ret := C.gofi_av_insert(e.c, unsafe.Pointer(&a.name[0]), C.size_t(len(a.name)), &fa)
	e.leave()
	if ret != 0 {
		return &rdma.OpError{Call: "fi_av_insert", Node: node, Err: fiErr(C.ssize_t(ret))}
	}
	p.connected = true
	p.fiaddr.Store(uint64(fa))
	// The poller says hello (a send to a node not yet connected is refused with FI_EAGAIN until the provider
	// has connected, so it retries) and starts the silence clock now.
	p.lastHeard = e.now()
	e.pending = append(e.pending, node)
	return nil
}

// changed wakes Ready's waiters. Called with peerMu held.
func (e *endpoint) changed() {
	close(e.readyCh)
	e.readyCh = make(chan struct{})
}

// Ready waits for a hello from every connected node, and for this node's hello to each to be taken by the
// provider. Hellos arrive like any message, so receives must be posted; Ready polls the endpoint itself when no
// one else does, keeping what it finds for Poll in order.
func (e *endpoint) Ready(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	sleep := 20 * time.Microsecond
	for {
		if e.closed.Load() || e.closing.Load() {
			return &rdma.OpError{Call: "ready", Node: -1, Err: errClosed}
		}
		if e.pollMu.TryLock() {
			e.pollStash()
			e.pollMu.Unlock()
		}
		var missing []int
		var errs []error
		e.peerMu.Lock()
		for n := range e.peers {
			p := &e.peers[n]
			switch {
			case !p.connected:
			case p.helloErr != nil:
				errs = append(errs, fmt.Errorf("node %d: %w", n, p.helloErr))
			case !p.helloGot || !p.helloSent:
				missing = append(missing, n)
			}
		}
		ch := e.readyCh
		e.peerMu.Unlock()
		if len(errs) > 0 {
			return fmt.Errorf("ofi: %w", errors.Join(errs...))
		}
		if len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ofi: node %d heard no hello from node(s) %s within %v over %s (do they run, with the same FI_PROVIDER, on a network this one reaches?)",
				e.node, nodeList(missing), timeout, e.self.prov)
		}
		t := time.NewTimer(sleep)
		select {
		case <-ch:
		case <-t.C:
		}
		t.Stop()
		sleep = min(2*sleep, 2*time.Millisecond)
	}
}

func nodeList(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ",")
}

func (e *endpoint) PeerRMA(node int) bool { return e.caps.RMA }

// dest resolves a node for an operation.
func (e *endpoint) dest(node int, call string) (C.fi_addr_t, error) {
	if node < 0 || node >= e.nodes {
		return 0, &rdma.OpError{Call: call, Node: node, Err: fmt.Errorf("no node %d in a job of %d", node, e.nodes)}
	}
	p := &e.peers[node]
	a := p.fiaddr.Load()
	if a == notConnected {
		return 0, &rdma.OpError{Call: call, Node: node, Err: errors.New("not connected")}
	}
	if p.gone.Load() {
		return 0, &rdma.OpError{Call: call, Node: node, Err: errors.New("the peer is gone")}
	}
	return C.fi_addr_t(a), nil
}

// local checks a local buffer against its registration and returns its descriptor, or says it must be pinned
// for the operation (no registration).
func (e *endpoint) local(b []byte, m rdma.MR, call string, node int) (desc unsafe.Pointer, pin bool, err error) {
	if len(b) == 0 {
		return nil, false, nil
	}
	if m == nil {
		if e.caps.LocalMR {
			return nil, false, &rdma.OpError{Call: call, Node: node, Err: errors.New("the provider needs local buffers registered (FI_MR_LOCAL) and none was given")}
		}
		return nil, true, nil
	}
	r, ok := m.(*mr)
	if !ok || r.e != e {
		return nil, false, &rdma.OpError{Call: call, Node: node, Err: errors.New("a registration of another endpoint")}
	}
	if r.dead.Load() {
		return nil, false, &rdma.OpError{Call: call, Node: node, Err: errors.New("a closed registration")}
	}
	p := uintptr(unsafe.Pointer(&b[0]))
	if p < r.base || p-r.base > uintptr(r.n) || uintptr(len(b)) > uintptr(r.n)-(p-r.base) {
		return nil, false, &rdma.OpError{Call: call, Node: node, Err: errors.New("the buffer is not inside its registration")}
	}
	return r.desc, false, nil
}

// getSlot takes a context for an operation; -1 when all are in flight (the queues are full).
func (e *endpoint) getSlot() int32 {
	e.slotMu.Lock()
	n := len(e.free)
	if n == 0 {
		e.slotMu.Unlock()
		return -1
	}
	i := e.free[n-1]
	e.free = e.free[:n-1]
	e.slotMu.Unlock()
	return i
}

func (e *endpoint) putSlot(i int32) {
	s := &e.slots[i]
	if s.pinned {
		s.pin.Unpin()
	}
	s.op, s.pinned, s.node, s.ctx, s.buf, s.blen, s.desc = 0, false, 0, 0, nil, 0, nil
	e.slotMu.Lock()
	e.free = append(e.free, i)
	e.slotMu.Unlock()
}

// slotOf maps an operation context back to its slot; -1 if it is not one of ours.
func (e *endpoint) slotOf(ctx unsafe.Pointer) int32 {
	p := uintptr(ctx)
	if p < e.slotBase || (p-e.slotBase)%e.slotSize != 0 {
		return -1
	}
	i := (p - e.slotBase) / e.slotSize
	if i >= uintptr(len(e.slots)) {
		return -1
	}
	return int32(i)
}

func ptr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// addr is a pinned buffer's address for C (gofi.h says why an integer).
func addr(p unsafe.Pointer) C.uintptr_t { return C.uintptr_t(uintptr(p)) }

// result turns a libfabric return into the interface's: FI_EAGAIN is rdma.ErrAgain itself (callers compare).
func result(ret C.ssize_t, call string, node int) error {
	switch {
	case ret == 0:
		return nil
	case ret == -C.FI_EAGAIN:
		return rdma.ErrAgain
	}
	return &rdma.OpError{Call: call, Node: node, Err: fiErr(ret)}
}

func (e *endpoint) PostRecv(b []byte, m rdma.MR, ctx uint64) error {
	call := e.call("recv")
	if len(b) == 0 {
		return &rdma.OpError{Call: call, Node: -1, Err: errors.New("an empty receive buffer")}
	}
	desc, pin, err := e.local(b, m, call, -1)
	if err != nil {
		return err
	}
	if !e.enter() {
		return &rdma.OpError{Call: call, Node: -1, Err: errClosed}
	}
	defer e.leave()
	i := e.getSlot()
	if i < 0 {
		return rdma.ErrAgain
	}
	s := &e.slots[i]
	s.op, s.node, s.ctx, s.buf, s.blen, s.desc = opRecv, -1, ctx, ptr(b), len(b), desc
	if pin {
		s.pin.Pin(s.buf)
		s.pinned = true
	}
	ret := C.gofi_recv(e.c, addr(s.buf), C.size_t(len(b)), desc, 0, C.uint64_t(ignoreData), C.size_t(i))
	if ret != 0 {
		e.putSlot(i)
	}
	return result(ret, call, -1)
}

// repost gives a receive whose message the endpoint consumed itself back to the provider, under the same slot.
func (e *endpoint) repost(i int32) error {
	s := &e.slots[i]
	tag, ignore := uint64(0), ignoreData
	if s.op == opBeat {
		tag, ignore = beatFlag, math.MaxUint32
	}
	ret := C.gofi_recv(e.c, addr(s.buf), C.size_t(s.blen), s.desc, C.uint64_t(tag), C.uint64_t(ignore), C.size_t(i))
	return result(ret, e.call("recv"), -1)
}

// postBeats posts the heartbeat receives (FI_TAGGED), in C memory.
func (e *endpoint) postBeats() error {
	for k := range C.GOFI_BEATS {
		i := e.getSlot()
		if i < 0 {
			return errors.New("ofi: no context for a heartbeat receive")
		}
		s := &e.slots[i]
		s.op, s.node, s.buf, s.blen = opBeat, -1, unsafe.Add(unsafe.Pointer(e.c.beat), k*C.GOFI_BEAT), C.GOFI_BEAT
		if err := e.repost(i); err != nil {
			e.putSlot(i)
			return err
		}
	}
	return nil
}

func (e *endpoint) Send(node int, b []byte, m rdma.MR, ctx uint64) error {
	call := e.call("send")
	if len(b) > e.caps.MaxMsg {
		return &rdma.OpError{Call: call, Node: node, Err: fmt.Errorf("a message of %d bytes (at most %d)", len(b), e.caps.MaxMsg)}
	}
	dest, err := e.dest(node, call)
	if err != nil {
		return err
	}
	desc, pin, err := e.local(b, m, call, node)
	if err != nil {
		return err
	}
	if !e.enter() {
		return &rdma.OpError{Call: call, Node: node, Err: errClosed}
	}
	defer e.leave()
	i := e.getSlot()
	if i < 0 {
		return rdma.ErrAgain
	}
	s := &e.slots[i]
	s.op, s.node, s.ctx = opSend, int32(node), ctx
	if pin {
		s.pin.Pin(ptr(b))
		s.pinned = true
	}
	ret := C.gofi_send(e.c, addr(ptr(b)), C.size_t(len(b)), desc, dest, C.uint64_t(dataWord(e.node)), C.size_t(i))
	if ret != 0 {
		e.putSlot(i)
		return result(ret, call, node)
	}
	e.peers[node].sent.Add(1)
	return nil
}

func (e *endpoint) Inject(node int, hdr, payload []byte) error {
	call := e.call("inject")
	if n := len(hdr) + len(payload); n > e.caps.InjectSize {
		return &rdma.OpError{Call: call, Node: node, Err: fmt.Errorf("%d bytes to inject (at most %d)", n, e.caps.InjectSize)}
	}
	dest, err := e.dest(node, call)
	if err != nil {
		return err
	}
	if !e.enter() {
		return &rdma.OpError{Call: call, Node: node, Err: errClosed}
	}
	ret := inject(e.c, hdr, payload, dest, C.uint64_t(dataWord(e.node)))
	e.leave()
	if ret != 0 {
		return result(ret, call, node)
	}
	e.peers[node].sent.Add(1)
	return nil
}

// inject passes its slices as &x[0] in the call itself, so that cgo checks the slices' memory only (a header may
// sit in a struct that holds pointers); libfabric copies them before returning.
func inject(c *C.gofi_ep, hdr, payload []byte, dest C.fi_addr_t, w C.uint64_t) C.ssize_t {
	switch {
	case len(hdr) > 0 && len(payload) > 0:
		return C.gofi_inject(c, unsafe.Pointer(&hdr[0]), C.size_t(len(hdr)), unsafe.Pointer(&payload[0]), C.size_t(len(payload)), dest, w)
	case len(hdr) > 0:
		return C.gofi_inject(c, unsafe.Pointer(&hdr[0]), C.size_t(len(hdr)), nil, 0, dest, w)
	case len(payload) > 0:
		return C.gofi_inject(c, unsafe.Pointer(&payload[0]), C.size_t(len(payload)), nil, 0, dest, w)
	}
	return C.gofi_inject(c, nil, 0, nil, 0, dest, w)
}

func (e *endpoint) rma(write bool, node int, local []byte, m rdma.MR, raddr, rkey, ctx uint64) error {
	call, op := "fi_readmsg", opRead
	if write {
		call, op = "fi_writemsg", opWrite
	}
	switch {
	case !e.caps.RMA:
		return &rdma.OpError{Call: call, Node: node, Err: errors.New("the endpoint has no FI_RMA")}
	case len(local) == 0:
		return &rdma.OpError{Call: call, Node: node, Err: errors.New("an empty transfer")}
	case e.caps.MaxRMA > 0 && len(local) > e.caps.MaxRMA:
		return &rdma.OpError{Call: call, Node: node, Err: fmt.Errorf("%d bytes in one transfer (at most %d)", len(local), e.caps.MaxRMA)}
	}
	dest, err := e.dest(node, call)
	if err != nil {
		return err
	}
	desc, pin, err := e.local(local, m, call, node)
	if err != nil {
		return err
	}
	if !e.enter() {
		return &rdma.OpError{Call: call, Node: node, Err: errClosed}
	}
	defer e.leave()
	i := e.getSlot()
	if i < 0 {
		return rdma.ErrAgain
	}
	s := &e.slots[i]
	s.op, s.node, s.ctx = op, int32(node), ctx
	if pin {
		s.pin.Pin(ptr(local))
		s.pinned = true
	}
	ret := C.gofi_rma(e.c, cbool(write), addr(ptr(local)), C.size_t(len(local)), desc, dest, C.uint64_t(raddr), C.uint64_t(rkey), C.size_t(i))
	if ret != 0 {
		e.putSlot(i)
	}
	return result(ret, call, node)
}

func (e *endpoint) Write(node int, local []byte, m rdma.MR, raddr, rkey uint64, ctx uint64) error {
	return e.rma(true, node, local, m, raddr, rkey, ctx)
}

func (e *endpoint) Read(node int, local []byte, m rdma.MR, raddr, rkey uint64, ctx uint64) error {
	return e.rma(false, node, local, m, raddr, rkey, ctx)
}

// Poll implements rdma.Endpoint: what Ready polled first, then the completion queue.
func (e *endpoint) Poll(cs []rdma.Completion) (int, error) {

	if len(cs) == 0 {
		return 0, nil
	}
	e.pollMu.Lock()
	defer e.pollMu.Unlock()
	k := 0
	if e.hasStash.Load() {
		k = copy(cs, e.stash)
		e.stash = e.stash[:copy(e.stash, e.stash[k:])]
		e.hasStash.Store(len(e.stash) > 0)
		if k == len(cs) {
			return k, nil
		}
	}
	if e.pollErr != nil {
		return k, e.pollErr
	}
	if !e.enter() {
		return k, &rdma.OpError{Call: "fi_cq_read", Node: -1, Err: errClosed}
	}
	n, err := e.pollInto(cs[k:])
	e.leave()
	if err != nil {
		e.pollErr = err
	}
	return k + n, err
}

// pollStash polls for Ready, keeping the completions for Poll. Called with pollMu held.
func (e *endpoint) pollStash() {
	if e.pollErr != nil || !e.enter() {
		return
	}
	n, err := e.pollInto(e.scratch)
	e.leave()
	if err != nil {
		e.pollErr = err
	}
	if n > 0 {
		e.stash = append(e.stash, e.scratch[:n]...)
		clear(e.scratch[:n])
		e.hasStash.Store(true)
		e.Wake()
	}
}

// pollInto does the periodic work (hellos, heartbeats, the silence clock) and moves completions into cs.
// Called with pollMu held and the endpoint entered.
func (e *endpoint) pollInto(cs []rdma.Completion) (int, error) {
	now := e.now()
	if len(e.pending) > 0 || len(e.acksOwed) > 0 || now >= e.nextBeat {
		e.duties(now)
	}
	k := e.drainEvents(cs)
	for k < len(cs) {
		want := len(cs) - k
		r := C.gofi_poll(e.c, C.size_t(want))
		switch {
		case r == -C.FI_EAGAIN:
			k += e.drainEvents(cs[k:])
			return k, nil
		case r == C.GOFI_ERRENTRY:
			got, err := e.errEntry(&cs[k], now)
			if err != nil {
				return k, err
			}
			if got {
				k++
			}
			continue
		case r < 0:
			return k, &rdma.OpError{Call: "fi_cq_read", Node: -1, Err: fiErr(r)}
		}
		ents := unsafe.Slice(e.c.cqbuf, int(r))
		for i := range ents {
			got, err := e.entry(&ents[i], &cs[k], now)
			if err != nil {
				return k, err
			}
			if got {
				k++
			}
		}
		if int(r) < want {
			break
		}
	}
	k += e.drainEvents(cs[k:])
	return k, nil
}

// event queues a peer event; it reaches the device after the completions polled before it.
func (e *endpoint) event(c rdma.Completion) {
	p := &e.peers[c.Node]
	if p.reported {
		return
	}
	p.reported = true
	p.gone.Store(true)
	e.events = append(e.events, c)
}

func (e *endpoint) drainEvents(cs []rdma.Completion) int {
	if len(e.events) == 0 {
		return 0
	}
	n := copy(cs, e.events)
	e.events = e.events[:copy(e.events, e.events[n:])]
	return n
}

// entry translates one completion; got is false for those the endpoint consumed itself.
func (e *endpoint) entry(ent *C.struct_fi_cq_tagged_entry, out *rdma.Completion, now time.Duration) (got bool, err error) {
	i := e.slotOf(ent.op_context)
	if i < 0 {
		return false, &rdma.OpError{Call: "fi_cq_read", Node: -1, Err: fmt.Errorf("a completion with a context (%p) that is no operation of this endpoint", ent.op_context)}
	}
	s := &e.slots[i]
	switch s.op {
	case opRecv:
		return e.received(i, ent, out, now), nil
	case opSend, opWrite, opRead:
		*out = rdma.Completion{Op: rdma.OpSend, Ctx: s.ctx, Node: int(s.node)}
		if s.op != opSend {
			// A transfer done is the peer's answer (tcp moves it in the peer's progress): it is alive.
			e.peers[s.node].lastHeard = now
			out.Op = rdma.OpWrite
			if s.op == opRead {
				out.Op = rdma.OpRead
			}
		}
		e.putSlot(i)
		return true, nil
	case opBeat:
		if _, node := e.sender(uint64(ent.tag)&math.MaxUint32, true); node >= 0 {
			e.peers[node].lastHeard = now
		}
		if !e.closing.Load() {
			if err := e.repost(i); err != nil {
				return false, fmt.Errorf("ofi: posting a heartbeat receive again: %w", err)
			}
		} else {
			e.putSlot(i)
		}
		return false, nil
	case opCtl:
		e.ctlDone(i)
		return false, nil
	}
	return false, &rdma.OpError{Call: "fi_cq_read", Node: -1, Err: fmt.Errorf("a completion of free context %d", i)}
}

// word is the word a completion carries, if it carries one.
func (e *endpoint) word(flags, tag, data C.uint64_t) (uint64, bool) {
	if e.tagged {
		return uint64(tag), true
	}
	if uint64(flags)&C.FI_REMOTE_CQ_DATA == 0 {
		return 0, false
	}
	return uint64(data), true
}

// sender returns the known node a word names, or -1.
func (e *endpoint) sender(w uint64, ok bool) (kind, node int) {
	if !ok {
		return 0, -1
	}
	kind, node, ok = parseWord(w)
	if !ok || node >= e.nodes || node == e.node || e.peers[node].fiaddr.Load() == notConnected {
		return 0, -1
	}
	return kind, node
}

func (e *endpoint) received(i int32, ent *C.struct_fi_cq_tagged_entry, out *rdma.Completion, now time.Duration) bool {
	s := &e.slots[i]
	kind, node := e.sender(e.word(ent.flags, ent.tag, ent.data))
	n := int(ent.len)

	if node < 0 || n > s.blen {
		// Not from a node of this job: nobody to blame. The buffer goes back.
		e.dropped.Add(1)
		return e.consumed(i, out)
	}
	p := &e.peers[node]
	p.lastHeard = now
	if kind != 0 {
		e.control(kind, node, unsafe.Slice((*byte)(s.buf), n))
		return e.consumed(i, out)
	}
	p.recvd++
	*out = rdma.Completion{Op: rdma.OpRecv, Ctx: s.ctx, Node: node, Len: n}
	e.putSlot(i)
	if p.byeGot && p.recvd >= p.byeCount {
		e.event(rdma.Completion{Op: rdma.OpPeerClosed, Node: node})
	}
	return true
}

// consumed posts again a receive whose message the endpoint took; if the provider refuses, the buffer goes to
// the device as a failed receive from no node, which it posts again itself.
func (e *endpoint) consumed(i int32, out *rdma.Completion) bool {
	if e.closing.Load() {
		e.putSlot(i)
		return false
	}
	err := e.repost(i)
	if err == nil {
		return false
	}
	*out = rdma.Completion{Op: rdma.OpRecv, Ctx: e.slots[i].ctx, Node: -1, Err: err}
	e.putSlot(i)
	return true
}

// control acts on a control message from node.
func (e *endpoint) control(kind, node int, b []byte) {
	p := &e.peers[node]
	switch kind {
	case ctlHello:
		err := checkHello(b, e.digest)
		e.peerMu.Lock()
		if err != nil {
			p.helloErr = err
		} else {
			p.helloGot = true
		}
		e.changed()
		e.peerMu.Unlock()
		if err != nil {
			e.event(rdma.Completion{Op: rdma.OpPeerLost, Node: node, Err: fmt.Errorf("ofi: node %d sent %w", node, err)})
		}
	case ctlBeat:
	case ctlBye:
		n, err := parseBye(b)
		if err != nil {
			e.event(rdma.Completion{Op: rdma.OpPeerLost, Node: node, Err: fmt.Errorf("ofi: node %d sent %w", node, err)})
			return
		}
		p.byeGot, p.byeCount, p.byeAt = true, n, e.now()
		// Nothing more goes to it (sends fail from now on), and it may free its endpoint once it knows.
		p.gone.Store(true)
		e.acksOwed = append(e.acksOwed, node)
		e.sendAcks()
		if p.recvd >= n {
			e.event(rdma.Completion{Op: rdma.OpPeerClosed, Node: node})
		}
	case ctlAck:
		p.ackGot = true
	}
}

// errEntry translates the error entry gofi_poll read.
func (e *endpoint) errEntry(out *rdma.Completion, now time.Duration) (bool, error) {
	er := &e.c.err
	ferr := &Error{Code: int(er.err), ProvCode: int(er.prov_errno), Detail: C.GoString(&e.c.errstr[0])}
	i := e.slotOf(er.op_context)
	if i < 0 {
		return false, &rdma.OpError{Call: "fi_cq_readerr", Node: -1, Err: ferr}
	}
	s := &e.slots[i]
	switch s.op {
	case opRecv:
		if e.closing.Load() {
			e.putSlot(i)
			return false, nil
		}
		kind, node := e.sender(e.word(er.flags, er.tag, er.data))
		if node >= 0 {
			// A message that failed still came: it counts toward the peer's goodbye.
			p := &e.peers[node]
			p.lastHeard = now
			if kind == 0 {
				p.recvd++
				if p.byeGot && p.recvd >= p.byeCount {
					e.event(rdma.Completion{Op: rdma.OpPeerClosed, Node: node})
				}
			}
		}
		*out = rdma.Completion{Op: rdma.OpRecv, Ctx: s.ctx, Node: node, Err: &rdma.OpError{Call: e.call("recv"), Node: node, Err: ferr}}
	case opSend:
		*out = rdma.Completion{Op: rdma.OpSend, Ctx: s.ctx, Node: int(s.node), Err: &rdma.OpError{Call: e.call("send"), Node: int(s.node), Err: ferr}}
	case opWrite:
		*out = rdma.Completion{Op: rdma.OpWrite, Ctx: s.ctx, Node: int(s.node), Err: &rdma.OpError{Call: "fi_writemsg", Node: int(s.node), Err: ferr}}
	case opRead:
		*out = rdma.Completion{Op: rdma.OpRead, Ctx: s.ctx, Node: int(s.node), Err: &rdma.OpError{Call: "fi_readmsg", Node: int(s.node), Err: ferr}}
	case opBeat:
		// A heartbeat that did not fit (nobody sends one with a payload) or a receive cancelled at close.
		if !e.closing.Load() {
			if err := e.repost(i); err != nil {
				return false, fmt.Errorf("ofi: posting a heartbeat receive again: %w", err)
			}
		} else {
			e.putSlot(i)
		}
		return false, nil
	case opCtl:
		node := int(s.node)
		kind := int(s.ctx)
		e.ctlDone(i)
		if kind != ctlBye && !e.closing.Load() {
			e.ctlFailed(kind, node, &rdma.OpError{Call: e.call("send"), Node: node, Err: ferr})
		}
		return false, nil
	default:
		return false, &rdma.OpError{Call: "fi_cq_readerr", Node: -1, Err: fmt.Errorf("an error of free context %d: %v", i, ferr)}
	}
	e.putSlot(i)
	return true, nil
}

func (e *endpoint) ctlDone(i int32) {
	s := &e.slots[i]
	if s.node >= 0 {
		e.peers[s.node].ctlBusy = false
	}
	if int(s.ctx) == ctlBye {
		e.byesOut--
	}
	e.putSlot(i)
}

// ctlFailed: a hello or heartbeat could not go.
func (e *endpoint) ctlFailed(kind, node int, err error) {
	if kind == ctlHello {
		e.peerMu.Lock()
		e.peers[node].helloErr = err
		e.changed()
		e.peerMu.Unlock()
	}
	e.event(rdma.Completion{Op: rdma.OpPeerLost, Node: node, Err: err})
}

// sendCtl sends a control message: by inject when it fits (no completion), else from the node's C control
// buffer with a completion (one at a time per node). Called with pollMu held and the endpoint entered.
func (e *endpoint) sendCtl(kind, node int, payload []byte) error {
	p := &e.peers[node]
	dest := C.fi_addr_t(p.fiaddr.Load())
	w := C.uint64_t(ctlWord(kind, e.node))
	if kind == ctlBeat && e.tagged {
		w |= beatFlag
	}
	if kind != ctlBye && len(payload) <= e.caps.InjectSize {
		ret := inject(e.c, payload, nil, dest, w)
		return result(ret, e.call("inject"), node)
	}
	if p.ctlBusy {
		return rdma.ErrAgain
	}
	i := e.getSlot()
	if i < 0 {
		return rdma.ErrAgain
	}
	s := &e.slots[i]
	s.op, s.node, s.ctx = opCtl, int32(node), uint64(kind)
	buf := unsafe.Add(unsafe.Pointer(e.c.ctl), node*C.GOFI_CTL)
	copy(unsafe.Slice((*byte)(buf), C.GOFI_CTL), payload)
	var b unsafe.Pointer
	if len(payload) > 0 {
		b = buf
	}
	ret := C.gofi_send(e.c, addr(b), C.size_t(len(payload)), nil, dest, w, C.size_t(i))
	if ret != 0 {
		e.putSlot(i)
		return result(ret, e.call("send"), node)
	}
	p.ctlBusy = true
	if kind == ctlBye {
		e.byesOut++
	}
	return nil
}

// duties: hellos still owed, heartbeats, and the silence clock. Called with pollMu held and the endpoint entered.
func (e *endpoint) duties(now time.Duration) {
	e.sendAcks()
	if len(e.pending) > 0 {
		keep := e.pending[:0]
		for _, n := range e.pending {
			err := e.sendCtl(ctlHello, n, e.hello)
			switch {
			case err == rdma.ErrAgain:
				keep = append(keep, n)
			case err != nil:
				e.ctlFailed(ctlHello, n, err)
			default:
				e.peerMu.Lock()
				e.peers[n].helloSent = true
				e.changed()
				e.peerMu.Unlock()
			}
		}
		e.pending = keep
	}
	if now < e.nextBeat || e.closing.Load() {
		// A closing endpoint sends only goodbyes and acknowledgements: a peer that took its goodbye may free
		// what a heartbeat would touch (libfabric's shm, between endpoints of one process).
		return
	}
	e.nextBeat = now + e.opts.Heartbeat
	for n := range e.peers {
		p := &e.peers[n]
		if p.fiaddr.Load() == notConnected || p.reported {
			continue
		}
		if p.byeGot {
			// A message it sent before its goodbye failed on the way, or it miscounted: it is gone anyway.
			if now-p.byeAt > e.opts.LossTimeout {
				e.event(rdma.Completion{Op: rdma.OpPeerLost, Node: n, Err: fmt.Errorf("ofi: node %d closed after sending %d messages, of which %d arrived", n, p.byeCount, p.recvd)})
			}
			continue
		}
		if silent := now - p.lastHeard; silent > e.opts.LossTimeout {
			e.event(rdma.Completion{Op: rdma.OpPeerLost, Node: n, Err: fmt.Errorf("ofi: nothing heard from node %d for %v (its process died, or its host is unreachable)", n, silent.Round(time.Millisecond))})
			continue
		}
		if err := e.sendCtl(ctlBeat, n, nil); err != nil && err != rdma.ErrAgain {
			e.event(rdma.Completion{Op: rdma.OpPeerLost, Node: n, Err: err})
		}
	}
}

// sendAcks acknowledges the goodbyes taken. Called with pollMu held and the endpoint entered.
func (e *endpoint) sendAcks() {
	keep := e.acksOwed[:0]
	for _, n := range e.acksOwed {
		if e.sendCtl(ctlAck, n, nil) == rdma.ErrAgain {
			keep = append(keep, n)
		}
	}
	e.acksOwed = keep
}

// Wait implements rdma.Endpoint: it blocks in the provider without taking a completion (gofi_wait), or, where
// the completion queue has no wait object, sleeps at most a millisecond.
func (e *endpoint) Wait(timeout time.Duration) {
	if e.hasStash.Load() || timeout <= 0 {
		return
	}
	if e.killed.Load() {
		time.Sleep(min(timeout, 10*time.Millisecond))
		return
	}
	if e.waitable.Load() {
		if !e.enter() {
			return
		}
		ms := int((timeout + time.Millisecond - 1) / time.Millisecond)
		ret := C.gofi_wait(e.c, C.int(ms))
		e.leave()
		if ret == 0 || ret == -C.FI_EAGAIN {
			return
		}
		e.waitable.Store(false) // the provider cannot wait after all: sleep from now on
	}
	t := time.NewTimer(min(timeout, time.Millisecond))
	select {
	case <-e.wakeCh:
	case <-t.C:
	}
	t.Stop()
}

func (e *endpoint) Wake() {
	e.signal()
	select {
	case e.wakeCh <- struct{}{}:
	default:
	}
}

// signal ends a wait in the provider, or the next one.
func (e *endpoint) signal() {
	if e.waitable.Load() && e.enter() {
		C.gofi_signal(e.c)
		e.leave()
	}
}

// abandon makes the endpoint behave as the endpoint of a killed process: from now on it sends nothing (no
// heartbeat, no goodbye), takes nothing and every call fails; only Close, which frees it, is left to do. For
// the tests of peer loss, which cannot kill a process that hosts other endpoints.
func (e *endpoint) abandon() { e.killed.Store(true) }

// Close says goodbye to every live peer and waits, up to CloseTimeout, until each acknowledged it (after which
// it sends nothing here: a provider may then free what the peer's sends would touch), then closes the
// registrations still open and the endpoint. A goodbye received meanwhile is acknowledged too.
func (e *endpoint) Close() error {
	e.closeOnce.Do(func() {
		e.closing.Store(true)
		e.pollMu.Lock()
		defer e.pollMu.Unlock()
		if e.enter() { // not after abandon: a killed process says no goodbye
			deadline := time.Now().Add(e.opts.CloseTimeout)
			// Goodbyes already here are taken first: those peers need an acknowledgement, not a goodbye.
			if _, err := e.pollInto(e.scratch); err == nil {
				clear(e.scratch)
				e.events = e.events[:0]
			}
			var todo, waiting []int
			for n := range e.peers {
				p := &e.peers[n]
				if p.fiaddr.Load() != notConnected && !p.reported && !p.byeGot {
					todo = append(todo, n)
				}
			}
			waiting = slices.Clone(todo)
			for time.Now().Before(deadline) {
				keep := todo[:0]
				for _, n := range todo {
					if err := e.sendCtl(ctlBye, n, byeMsg(e.peers[n].sent.Load())); err == rdma.ErrAgain {
						keep = append(keep, n)
					}
				}
				todo = keep
				// Completions now concern nobody but the goodbyes.
				if _, err := e.pollInto(e.scratch); err != nil {
					break
				}
				clear(e.scratch)
				e.events = e.events[:0]
				waiting = slices.DeleteFunc(waiting, func(n int) bool {
					p := &e.peers[n]
					return p.ackGot || p.reported && !p.byeGot
				})
				if len(todo) == 0 && len(waiting) == 0 && len(e.acksOwed) == 0 && e.byesOut == 0 {
					break
				}
				runtime.Gosched()
			}
			e.leave()
		}
		C.gofi_signal(e.c) // a Wait under way returns
		e.guard.Lock()
		defer e.guard.Unlock()
		e.closed.Store(true)
		e.mrMu.Lock()
		for m := range e.mrs {
			if ret := C.gofi_mr_close(m.c); ret != 0 && e.closeErr == nil {
				e.closeErr = &rdma.OpError{Call: "fi_close(mr)", Node: -1, Err: fiErr(C.ssize_t(ret))}
			}
			m.dead.Store(true)
			m.pin.Unpin()
			delete(e.mrs, m)
		}
		e.mrMu.Unlock()
		C.gofi_close(e.c)
		e.c = nil
		// libfabric let go of every posted buffer.
		for i := range e.slots {
			if e.slots[i].pinned {
				e.slots[i].pin.Unpin()
				e.slots[i].pinned = false
			}
		}
	})
	return e.closeErr
}

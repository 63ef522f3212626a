// Package memprov is an rdma provider in memory, for the tests of the rdma protocol: the endpoints of one process
// exchange messages through a Fabric, and the Fabric plays the hard parts of a real fabric on purpose. It
// delivers a pair's messages out of order (unless Ordered), holds completions back for a random number of polls,
// refuses work with ErrAgain when a target's queue is full, checks every Write and Read against the target's live
// registrations (a stale or wrong key is an error completion), and lets a test kill an endpoint as a dying process
// would. Randomness comes from Options.Seed, so a failure replays.
//
// Imports: gompj/rdma and the standard library.
package memprov

import (
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/rdma"
)

// Options shape a Fabric.
type Options struct {
	Seed       int64
	Ordered    bool // messages of a pair land and complete in order (FI_ORDER_SAS); else they are shuffled
	Delay      int  // a completion is held back for up to this many polls
	InjectSize int  // default 256
	MaxMsg     int  // default 1 MiB
	RMA        bool
	// NoRMA, if set, refuses Write and Read between two nodes (as CMA refused between two processes).
	NoRMA      func(a, b int) bool
	MaxRMA     int
	VirtAddr   bool
	LocalMR    bool
	SplitCopy  bool
	EagerLimit int
	QueueLimit int  // ErrAgain once a target holds this many undelivered messages (default 64)
	Readv      bool // endpoints implement rdma.VectorRMA (Readv and Writev)
	RecvDepth  int
}

// Fabric links the endpoints of one process.
type Fabric struct {
	opts Options
	mu   sync.Mutex
	rng  *rand.Rand
	eps  map[string]*endpoint
	n    int
}

// New returns a fabric.
func New(o Options) *Fabric {
	if o.InjectSize == 0 {
		o.InjectSize = 256
	}
	if o.MaxMsg == 0 {
		o.MaxMsg = 1 << 20
	}
	if o.QueueLimit == 0 {
		o.QueueLimit = 64
	}
	return &Fabric{opts: o, rng: rand.New(rand.NewSource(o.Seed)), eps: map[string]*endpoint{}}
}

// Name implements rdma.Provider.
func (f *Fabric) Name() string { return "mem" }

// Open implements rdma.Provider.
func (f *Fabric) Open(cfg rdma.EndpointConfig) (rdma.Endpoint, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	e := &endpoint{f: f, node: cfg.Node, addr: "mem-" + strconv.Itoa(f.n), peers: map[int]*endpoint{}, mrs: map[uint64]*mr{},
		wake: make(chan struct{}, 1), lost: map[int]bool{}}
	f.eps[e.addr] = e
	if f.opts.Readv {
		return readvEndpoint{e}, nil
	}
	return e, nil
}

// readvEndpoint is an endpoint that offers rdma.VectorRMA.
type readvEndpoint struct{ *endpoint }

// Readv implements rdma.VectorRMA.
func (e readvEndpoint) Readv(node int, locals [][]byte, raddr, rkey, ctx uint64) error {
	return e.vectored(false, node, locals, raddr, rkey, ctx)
}

// Writev implements rdma.VectorRMA.
func (e readvEndpoint) Writev(node int, locals [][]byte, raddr, rkey, ctx uint64) error {
	return e.vectored(true, node, locals, raddr, rkey, ctx)
}

// vectored checks a vectored one-sided operation's buffers (at most device.IovMax) and posts it.
func (e readvEndpoint) vectored(write bool, node int, locals [][]byte, raddr, rkey, ctx uint64) error {
	if len(locals) > device.IovMax {
		what := "readv into"
		if write {
			what = "writev from"
		}
		return fmt.Errorf("memprov: %s %d buffers, over %d", what, len(locals), device.IovMax)
	}
	n := 0
	for _, b := range locals {
		n += len(b)
	}
	return e.rmav(write, node, locals, n, nil, raddr, rkey, ctx)
}

// Kill makes ep vanish as a killed process would: its peers see OpPeerLost, and it does nothing more.
func (f *Fabric) Kill(ep rdma.Endpoint) {
	e, ok := ep.(*endpoint)
	if !ok {
		e = ep.(readvEndpoint).endpoint
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if e.dead {
		return
	}
	e.dead = true
	for _, o := range f.eps {
		if o != e && !o.closed && !o.dead {
			if _, ok := o.peers[e.node]; ok && !o.lost[e.node] {
				o.lost[e.node] = true
				o.inbox = append(o.inbox, msg{from: e.node, event: rdma.OpPeerLost,
					err: errors.New("memprov: the process was killed")})
				o.signal()
			}
		}
	}
}

type msg struct {
	from  int
	data  []byte
	event rdma.Op // OpPeerLost or OpPeerClosed instead of data
	err   error
}

type posted struct {
	b   []byte
	ctx uint64
}

type pending struct {
	c     rdma.Completion
	delay int
}

type endpoint struct {
	f      *Fabric
	node   int
	addr   string
	peers  map[int]*endpoint
	posted []posted
	inbox  []msg
	cq     []pending
	mrs    map[uint64]*mr
	wake   chan struct{}
	dead   bool
	closed bool
	lost   map[int]bool
	claims [claimWords]uint8 // 0 free, 1 open, 2 taken
}

// claimWords is how many claim words an endpoint has: few, so that the tests run out of them.
const claimWords = 4

// OpenClaim implements rdma.Claimer, on a fabric with SplitCopy only.
func (e *endpoint) OpenClaim() (uint64, bool) {
	e.f.mu.Lock()
	defer e.f.mu.Unlock()
	if !e.f.opts.SplitCopy {
		return 0, false
	}
	for i, c := range e.claims {
		if c == 0 {
			e.claims[i] = 1
			return uint64(i), true
		}
	}
	return 0, false
}

// Claim implements rdma.Claimer. Claiming a word that is not open is an error: the device closes a word only
// when neither end will claim it again.
func (e *endpoint) Claim(node int, token uint64) (bool, error) {
	e.f.mu.Lock()
	defer e.f.mu.Unlock()
	t := e
	if node != e.node {
		if t = e.peers[node]; t == nil {
			return false, fmt.Errorf("memprov: claim word of node %d, which is not connected", node)
		}
	}
	if token >= claimWords || t.claims[token] == 0 {
		return false, fmt.Errorf("memprov: claim word %d of node %d is not open", token, node)
	}
	if t.claims[token] == 2 {
		return false, nil
	}
	t.claims[token] = 2
	return true, nil
}

// CloseClaim implements rdma.Claimer.
func (e *endpoint) CloseClaim(token uint64) {
	e.f.mu.Lock()
	defer e.f.mu.Unlock()
	if token < claimWords {
		e.claims[token] = 0
	}
}

type mr struct {
	e      *endpoint
	key    uint64
	b      []byte
	acc    rdma.Access
	closed bool
}

func (m *mr) Key() uint64 { return m.key }

func (m *mr) Desc() unsafe.Pointer { return unsafe.Pointer(m) }

func (m *mr) Addr(p unsafe.Pointer) uint64 {
	if m.e.f.opts.VirtAddr {
		return uint64(uintptr(p))
	}
	return uint64(uintptr(p) - uintptr(unsafe.Pointer(&m.b[0])))
}

func (m *mr) Close() error {
	f := m.e.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if m.closed {
		return errors.New("memprov: registration closed twice")
	}
	m.closed = true
	delete(m.e.mrs, m.key)
	return nil
}

// covers reports whether b lies inside the registration.
func (m *mr) covers(b []byte) bool {
	if len(b) == 0 {
		return true
	}
	lo := uintptr(unsafe.Pointer(&m.b[0]))
	p := uintptr(unsafe.Pointer(&b[0]))
	return p >= lo && p+uintptr(len(b)) <= lo+uintptr(len(m.b))
}

func (e *endpoint) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

func (e *endpoint) Caps() rdma.Caps {
	o := e.f.opts
	return rdma.Caps{MaxMsg: o.MaxMsg, InjectSize: o.InjectSize, RecvDepth: o.RecvDepth, Ordered: o.Ordered, RMA: o.RMA,
		MaxRMA: o.MaxRMA, VirtAddr: o.VirtAddr, LocalMR: o.LocalMR, RegisterCost: true, SplitCopy: o.SplitCopy,
		EagerLimit: o.EagerLimit}
}

func (e *endpoint) Address() []byte { return []byte(e.addr) }

func (e *endpoint) Describe() string { return "mem" }

func (e *endpoint) Connect(node int, addr []byte) error {
	e.f.mu.Lock()
	defer e.f.mu.Unlock()
	p := e.f.eps[string(addr)]
	if p == nil {
		return fmt.Errorf("memprov: no endpoint at %q", addr)
	}
	if p.node != node {
		return fmt.Errorf("memprov: %q is node %d's endpoint, not node %d's", addr, p.node, node)
	}
	e.peers[node] = p
	return nil
}

func (e *endpoint) Ready(time.Duration) error { return nil }

func (e *endpoint) PeerRMA(node int) bool {
	o := e.f.opts
	return o.RMA && (o.NoRMA == nil || !o.NoRMA(e.node, node))
}

func (e *endpoint) Register(b []byte, acc rdma.Access) (rdma.MR, error) {
	if len(b) == 0 {
		return nil, errors.New("memprov: registering nothing")
	}
	e.f.mu.Lock()
	defer e.f.mu.Unlock()
	m := &mr{e: e, b: b, acc: acc}
	for m.key == 0 || e.mrs[m.key] != nil {
		m.key = e.f.rng.Uint64()
	}
	e.mrs[m.key] = m
	return m, nil
}

// local checks a local buffer's registration when the fabric asks for them.
func (e *endpoint) local(b []byte, m rdma.MR, what string) error {
	if !e.f.opts.LocalMR || len(b) == 0 {
		return nil
	}
	r, _ := m.(*mr)
	if r == nil || r.closed || r.e != e || !r.covers(b) {
		return fmt.Errorf("memprov: %s of a local buffer without a live registration covering it", what)
	}
	return nil
}

func (e *endpoint) usable() error {
	if e.dead || e.closed {
		return errors.New("memprov: endpoint closed")
	}
	return nil
}

func (e *endpoint) PostRecv(b []byte, m rdma.MR, ctx uint64) error {
	e.f.mu.Lock()
	defer e.f.mu.Unlock()
	if err := e.usable(); err != nil {
		return err
	}
	if err := e.local(b, m, "receive"); err != nil {
		return err
	}
	if o := e.f.opts.RecvDepth; o > 0 && len(e.posted) >= o {
		return rdma.ErrAgain
	}
	e.posted = append(e.posted, posted{b, ctx})
	return nil
}

func (e *endpoint) target(node int, call string) (*endpoint, error) {
	if err := e.usable(); err != nil {
		return nil, err
	}
	t := e.peers[node]
	if t == nil {
		return nil, &rdma.OpError{Call: call, Node: node, Err: errors.New("not connected")}
	}
	if t.dead || t.closed {
		return nil, &rdma.OpError{Call: call, Node: node, Err: errors.New("unreachable")}
	}
	return t, nil
}

func (e *endpoint) deliver(t *endpoint, data []byte) {
	t.inbox = append(t.inbox, msg{from: e.node, data: data})
	t.signal()
}

func (e *endpoint) complete(c rdma.Completion) {
	d := 0
	if e.f.opts.Delay > 0 {
		d = e.f.rng.Intn(e.f.opts.Delay + 1)
	}
	e.cq = append(e.cq, pending{c: c, delay: d})
	e.signal()
}

func (e *endpoint) Send(node int, b []byte, m rdma.MR, ctx uint64) error {
	e.f.mu.Lock()
	defer e.f.mu.Unlock()
	t, err := e.target(node, "send")
	if err != nil {
		return err
	}
	if err := e.local(b, m, "send"); err != nil {
		return err
	}
	if len(b) > e.f.opts.MaxMsg {
		return fmt.Errorf("memprov: send of %d bytes over %d", len(b), e.f.opts.MaxMsg)
	}
	if len(t.inbox) >= e.f.opts.QueueLimit {
		return rdma.ErrAgain
	}
	e.deliver(t, append([]byte(nil), b...))
	e.complete(rdma.Completion{Op: rdma.OpSend, Ctx: ctx, Node: node})
	return nil
}

func (e *endpoint) Inject(node int, hdr, payload []byte) error {
	e.f.mu.Lock()
	defer e.f.mu.Unlock()
	t, err := e.target(node, "inject")
	if err != nil {
		return err
	}
	if len(hdr)+len(payload) > e.f.opts.InjectSize {
		return fmt.Errorf("memprov: inject of %d bytes over %d", len(hdr)+len(payload), e.f.opts.InjectSize)
	}
	if len(t.inbox) >= e.f.opts.QueueLimit {
		return rdma.ErrAgain
	}
	e.deliver(t, append(append([]byte(nil), hdr...), payload...))
	return nil
}

// remote finds the target memory of a Write or Read.
func (e *endpoint) remote(t *endpoint, n int, raddr, rkey uint64, acc rdma.Access) ([]byte, error) {
	m := t.mrs[rkey]
	if m == nil || m.acc&acc == 0 {
		return nil, fmt.Errorf("memprov: node %d has no registration with key %#x allowing that access", t.node, rkey)
	}
	off := raddr
	if e.f.opts.VirtAddr {
		off = raddr - uint64(uintptr(unsafe.Pointer(&m.b[0])))
	}
	if off > uint64(len(m.b)) || uint64(n) > uint64(len(m.b))-off {
		return nil, fmt.Errorf("memprov: %d bytes at %#x fall outside node %d's registration", n, raddr, t.node)
	}
	return m.b[off : off+uint64(n)], nil
}

func (e *endpoint) rma(write bool, node int, local []byte, m rdma.MR, raddr, rkey, ctx uint64) error {
	return e.rmav(write, node, [][]byte{local}, len(local), m, raddr, rkey, ctx)
}

// rmav is a Read or Write of n bytes at raddr into or from the locals, in order.
func (e *endpoint) rmav(write bool, node int, locals [][]byte, n int, m rdma.MR, raddr, rkey, ctx uint64) error {
	e.f.mu.Lock()
	defer e.f.mu.Unlock()
	call, op, acc := "read", rdma.OpRead, rdma.AccessRemoteRead
	if write {
		call, op, acc = "write", rdma.OpWrite, rdma.AccessRemoteWrite
	}
	t, err := e.target(node, call)
	if err != nil {
		return err
	}
	if !e.PeerRMA(node) {
		return &rdma.OpError{Call: call, Node: node, Err: errors.New("RMA refused")}
	}
	if max := e.f.opts.MaxRMA; max > 0 && n > max {
		return fmt.Errorf("memprov: %s of %d bytes over %d", call, n, max)
	}
	for _, local := range locals {
		if err := e.local(local, m, call); err != nil {
			return err
		}
	}
	c := rdma.Completion{Op: op, Ctx: ctx, Node: node}
	if rb, err := e.remote(t, n, raddr, rkey, acc); err != nil {
		c.Err = &rdma.OpError{Call: call, Node: node, Err: err}
	} else {
		for _, local := range locals {
			if write {
				copy(rb, local)
			} else {
				copy(local, rb)
			}
			rb = rb[len(local):]
		}
	}
	e.complete(c)
	return nil
}

func (e *endpoint) Write(node int, local []byte, m rdma.MR, raddr, rkey uint64, ctx uint64) error {
	return e.rma(true, node, local, m, raddr, rkey, ctx)
}

func (e *endpoint) Read(node int, local []byte, m rdma.MR, raddr, rkey uint64, ctx uint64) error {
	return e.rma(false, node, local, m, raddr, rkey, ctx)
}

// Poll lands waiting messages in posted receives (shuffling a pair's order unless Ordered), then returns the
// completions whose delay has run out (in random order unless Ordered).
func (e *endpoint) Poll(cs []rdma.Completion) (int, error) {
	f := e.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if e.dead {
		return 0, errors.New("memprov: endpoint killed")
	}
	for len(e.inbox) > 0 {
		i := 0
		if !f.opts.Ordered && len(e.inbox) > 1 && f.rng.Intn(3) == 0 {
			i = f.rng.Intn(len(e.inbox))
			if e.inbox[i].event != 0 {
				i = 0 // a peer's loss or close comes after what it sent
			}
		}
		m := e.inbox[i]
		if m.event != 0 {
			// A peer's loss or close is reported after every completion of what it sent before.
			if e.pendingFrom(m.from) {
				break
			}
			e.inbox = e.inbox[1:]
			e.cq = append(e.cq, pending{c: rdma.Completion{Op: m.event, Node: m.from, Err: m.err}})
			continue
		}
		if len(e.posted) == 0 {
			break
		}
		pr := e.posted[0]
		e.posted = e.posted[1:]
		e.inbox = append(e.inbox[:i], e.inbox[i+1:]...)
		c := rdma.Completion{Op: rdma.OpRecv, Ctx: pr.ctx, Node: m.from, Len: len(m.data)}
		if len(m.data) > len(pr.b) {
			c.Err = fmt.Errorf("memprov: message of %d bytes into a receive of %d", len(m.data), len(pr.b))
		} else {
			copy(pr.b, m.data)
		}
		e.complete(c)
	}
	n := 0
	keep := e.cq[:0]
	var ready []rdma.Completion
	for _, p := range e.cq {
		if p.delay > 0 {
			p.delay--
			keep = append(keep, p)
			continue
		}
		ready = append(ready, p.c)
	}
	e.cq = keep
	if !f.opts.Ordered {
		f.rng.Shuffle(len(ready), func(i, j int) { ready[i], ready[j] = ready[j], ready[i] })
		// Events stay behind the completions that came before them.
		sort.SliceStable(ready, func(i, j int) bool {
			return !isEvent(ready[i].Op) && isEvent(ready[j].Op)
		})
	}
	for _, c := range ready {
		if n < len(cs) {
			cs[n] = c
			n++
		} else {
			e.cq = append(e.cq, pending{c: c})
		}
	}
	return n, nil
}

func isEvent(o rdma.Op) bool { return o == rdma.OpPeerLost || o == rdma.OpPeerClosed }

// pendingFrom reports whether a completion of a message from node is still held back.
func (e *endpoint) pendingFrom(node int) bool {
	for _, p := range e.cq {
		if p.c.Op == rdma.OpRecv && p.c.Node == node {
			return true
		}
	}
	return false
}

func (e *endpoint) Wait(timeout time.Duration) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-e.wake:
	case <-t.C:
	}
}

func (e *endpoint) Wake() { e.signal() }

func (e *endpoint) Close() error {
	f := e.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if e.closed || e.dead {
		return nil
	}
	e.closed = true
	for _, o := range f.eps {
		if o != e && !o.closed && !o.dead {
			if _, ok := o.peers[e.node]; ok {
				o.inbox = append(o.inbox, msg{from: e.node, event: rdma.OpPeerClosed})
				o.signal()
			}
		}
	}
	return nil
}

//go:build linux

package shm

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gompj/gompj/internal/mem"
	"github.com/gompj/gompj/netdev/auth"
	"github.com/gompj/gompj/rdma"
)

// Purpose is the handshake label of the provider's Unix socket connections (see netdev/auth).
const Purpose = "shm"

// Defaults for the zero values of Options.
const (
	DefaultRingCells        = 4096 // 256 KiB per inbound ring
	DefaultHandshakeTimeout = 5 * time.Second
	DefaultConnectTimeout   = 30 * time.Second
	eagerCMA                = 32 << 10 // with CMA, larger messages move in one copy (doc.go says why 32 KiB)
	eagerRings              = 32 << 10 // without, everything goes through the rings: bigger pieces
)

// Options configure the provider.
type Options struct {
	NoCMA            bool // copy large messages through the rings even where CMA works (GOMPJ_CMA=0)
	RingCells        int  // cells of each inbound ring, a power of two (default 4096, 256 KiB)
	HandshakeTimeout time.Duration
	ConnectTimeout   time.Duration
}

// Provider is the shm provider.
type Provider struct{ Opts Options }

// Name implements rdma.Provider.
func (Provider) Name() string { return "shm" }

// Open implements rdma.Provider: it creates the node's segment and listens on an abstract Unix socket (a name
// in the network namespace, gone when the process is: nothing to clean up).
func (pr Provider) Open(cfg rdma.EndpointConfig) (rdma.Endpoint, error) {
	o := pr.Opts
	if o.RingCells == 0 {
		o.RingCells = DefaultRingCells
	}
	if o.HandshakeTimeout == 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.RingCells < minCells || ringBytes(o.RingCells) > maxRingLen || o.RingCells&(o.RingCells-1) != 0 {
		return nil, fmt.Errorf("shm: %d cells per ring (a power of two from %d)", o.RingCells, minCells)
	}
	if cfg.Nodes <= 0 || cfg.Node < 0 || cfg.Node >= cfg.Nodes {
		return nil, fmt.Errorf("shm: node %d of %d", cfg.Node, cfg.Nodes)
	}
	if len(cfg.Secret) < auth.MinSecret {
		return nil, fmt.Errorf("shm: job secret of %d bytes is too short (at least %d)", len(cfg.Secret), auth.MinSecret)
	}
	e := &endpoint{cfg: cfg, opts: o, byNode: make([]*peer, cfg.Nodes), ready: make([]atomic.Pointer[peer], cfg.Nodes), early: map[int]net.Conn{},
		conns: map[net.Conn]bool{}, changed: make(chan struct{}), quit: make(chan struct{}), probe: new(uint64)}
	var rnd [16]byte
	rand.Read(rnd[:])
	*e.probe = binary.LittleEndian.Uint64(rnd[8:])
	e.name = "gompj-shm-" + hex.EncodeToString(rnd[:8])
	e.cma, e.cmaWhy = cmaStatus(o.NoCMA, e.probe)
	e.maxMsg = maxMsg(uint64(o.RingCells))
	var err error
	if e.seg, err = newSegment(cfg.Node); err != nil {
		return nil, err
	}
	if e.door, err = newDoorbell(e.seg.ctl); err != nil {
		e.seg.close()
		return nil, err
	}
	e.self = e.door.bell()
	if e.ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: "@" + e.name, Net: "unix"}); err != nil {
		e.door.close()
		e.seg.close()
		return nil, fmt.Errorf("shm: listening on the abstract socket %s: %w", e.name, err)
	}
	e.wg.Add(1)
	go e.acceptLoop()
	return e, nil
}

type endpoint struct {
	cfg    rdma.EndpointConfig
	opts   Options
	name   string
	ln     *net.UnixListener
	seg    *segment
	heap   heap                          // the holes Free left in the segment (heap.go)
	door   *doorbell                     // where this node's progress goroutine sleeps
	take   func(node int, m []byte) bool // the device's offer for messages in place (OfferInPlace), or nil
	self   bell                          // its ringing end, for wake-ups from this process
	segMu  sync.Mutex
	probe  *uint64
	cma    bool
	cmaWhy string
	maxMsg int

	// closed stops the data path. The mappings outlive Close: a sender that passed the check as Close ran may
	// still write into a ring, so they go only once the endpoint is unreachable (a cleanup), which keeps every
	// send free of locks.
	closed atomic.Bool

	mu       sync.Mutex
	byNode   []*peer                // set by Connect, under mu
	ready    []atomic.Pointer[peer] // set once a peer's handshake is done: the data path's lookup, lock-free
	early    map[int]net.Conn
	conns    map[net.Conn]bool // every connection, for Close
	quitting bool
	changed  chan struct{}
	up       atomic.Pointer[[]*peer] // the peers whose handshake is done, for Poll

	postMu sync.Mutex
	posted []postedBuf

	claims claims // claim words in the control page (claim.go)

	locMu    sync.Mutex
	local    []rdma.Completion
	hasLocal atomic.Bool
	woken    atomic.Bool
	next     int // Poll's starting peer, for fairness

	wg   sync.WaitGroup
	quit chan struct{}
}

type postedBuf struct {
	b   []byte
	ctx uint64
}

// peer is one connected node.
type peer struct {
	node    int
	sock    string
	pid     int
	conn    *net.UnixConn
	in      *consumer // its ring into our segment
	out     *producer // our ring into its segment
	pm      *peerMaps
	bell    bell // its doorbell: its control page and our descriptor of its eventfd (-1 until the handshake passes it)
	cma     bool
	started bool         // a handshake is under way or done
	err     error        // the handshake failed
	state   atomic.Int32 // stateUp, stateClosing (goodbye seen), stateLost
	why     atomic.Value // error: why it was lost
	told    atomic.Bool  // its closing or loss was reported
	broken  atomic.Bool  // our ring into it is corrupt
	full    atomic.Bool  // a push found our ring into it full: Wait looks for room before it sleeps
	// segFd is our descriptor of its segment (-1 until the handshake passes it), kept for the windows that map
	// the memory it lends (heap.go) as Reads and Writes of it come.
	segFd int
	winMu sync.Mutex
	win   []byte   // the newest mapping of its segment, from offset 0 (lentRange)
	seen  int64    // its segment's size when last looked at: win's bytes below it may be touched
	wins  [][]byte // every mapping made, for the endpoint's cleanup
	// populated is the ranges of win whose pages are populated (mapped): sorted, disjoint, not adjacent (mapped)
	populated []span
	winsGone  bool // the endpoint closed: the mappings wait for the endpoint's cleanup
}

const (
	stateUp int32 = iota
	stateClosing
	stateLost
)

const bye = 'B'

// Address implements rdma.Endpoint: [1][name length][name].
func (e *endpoint) Address() []byte {
	b := []byte{1, byte(len(e.name))}
	return append(b, e.name...)
}

func (e *endpoint) Caps() rdma.Caps {
	eager := eagerRings
	if e.cma {
		eager = eagerCMA
	}
	return rdma.Caps{MaxMsg: e.maxMsg, InjectSize: e.maxMsg, Ordered: true, RMA: e.cma, VirtAddr: true, SplitCopy: true,
		EagerLimit: eager}
}

// Describe says how the provider moves data, for `gompj info`.
func (e *endpoint) Describe() string {
	if e.cma {
		return "shm: rings in shared memory, large messages in one copy (CMA, process_vm_readv/writev)"
	}
	return "shm: rings in shared memory, large messages copied through the rings (CMA off: " + e.cmaWhy + ")"
}

// CMA reports whether cross-memory attach works for this process, and if not, why (for `gompj info`).
func CMA(off bool) (ok bool, why string) {
	var probe uint64 = 0x5eed
	return cmaStatus(off, &probe)
}

func (e *endpoint) signal() {
	e.mu.Lock()
	close(e.changed)
	e.changed = make(chan struct{})
	e.mu.Unlock()
}

// Connect implements rdma.Endpoint. The node with the lower id dials; an early connection from a lower-id node
// that was accepted before Connect is used now.
func (e *endpoint) Connect(node int, addr []byte) error {
	if node < 0 || node >= e.cfg.Nodes || node == e.cfg.Node {
		return fmt.Errorf("shm: connect to node %d (this is node %d of %d)", node, e.cfg.Node, e.cfg.Nodes)
	}
	if len(addr) < 3 || addr[0] != 1 || int(addr[1]) != len(addr)-2 {
		return fmt.Errorf("shm: node %d's address is not a shm address", node)
	}
	p := &peer{node: node, sock: string(addr[2:]), bell: bell{fd: -1}, segFd: -1}
	e.mu.Lock()
	if e.byNode[node] != nil {
		e.mu.Unlock()
		return fmt.Errorf("shm: node %d connected twice", node)
	}
	e.byNode[node] = p
	c := e.early[node]
	delete(e.early, node)
	if c != nil {
		p.started = true
	}
	e.mu.Unlock()
	switch {
	case c != nil:
		e.spawn(func() { e.attach(p, c.(*net.UnixConn)) })
	case node > e.cfg.Node:
		e.spawn(func() { e.dial(p) })
	}
	return nil
}

func (e *endpoint) spawn(f func()) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		f()
	}()
}

func (e *endpoint) acceptLoop() {
	defer e.wg.Done()
	for {
		c, err := e.ln.AcceptUnix()
		if err != nil {
			select {
			case <-e.quit:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if !e.track(c) {
			c.Close()
			return
		}
		e.spawn(func() { e.accepted(c) })
	}
}

// track records a connection for Close; it reports false once Close has begun.
func (e *endpoint) track(c net.Conn) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.quitting {
		return false
	}
	e.conns[c] = true
	return true
}

// accepted authenticates a connection: the job secret (both ways) and the node it claims to be.
func (e *endpoint) accepted(c *net.UnixConn) {
	h, err := auth.Accept(c, e.cfg.Secret, Purpose, e.opts.HandshakeTimeout)
	if err != nil || int(h.To) != e.cfg.Node || h.From < 0 || int(h.From) >= e.cfg.Nodes || int(h.From) >= e.cfg.Node {
		c.Close()
		return
	}
	n := int(h.From)
	e.mu.Lock()
	p := e.byNode[n]
	if p == nil {
		if old := e.early[n]; old != nil {
			old.Close()
		}
		e.early[n] = c
		e.mu.Unlock()
		return
	}
	if p.started {
		e.mu.Unlock()
		c.Close()
		return
	}
	p.started = true
	e.mu.Unlock()
	e.attach(p, c)
}

// dial connects to a higher-id node until ConnectTimeout.
func (e *endpoint) dial(p *peer) {
	deadline := time.Now().Add(e.opts.ConnectTimeout)
	backoff := time.Millisecond
	for {
		c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: "@" + p.sock, Net: "unix"})
		if err == nil && !e.track(c) {
			c.Close()
			return
		}
		if err == nil {
			err = auth.Dial(c, e.cfg.Secret, Purpose, auth.Hello{From: int32(e.cfg.Node), To: int32(p.node)}, e.opts.HandshakeTimeout)
			if err == nil {
				e.mu.Lock()
				p.started = true
				e.mu.Unlock()
				e.attach(p, c)
				return
			}
			c.Close()
			if errors.Is(err, auth.ErrAuth) {
				e.fail(p, err)
				return
			}
		}
		if time.Now().After(deadline) {
			e.fail(p, fmt.Errorf("cannot connect within %v: %w", e.opts.ConnectTimeout, err))
			return
		}
		select {
		case <-e.quit:
			return
		case <-time.After(backoff): // retry pacing while the peer's listener comes up
		}
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

func (e *endpoint) fail(p *peer, err error) {
	e.mu.Lock()
	if p.err == nil {
		p.err = fmt.Errorf("shm: node %d: %w", p.node, err)
	}
	e.mu.Unlock()
	e.signal()
}

// hello is what each end of a new connection tells the other, with its segment's descriptor and its doorbell's
// (an eventfd), in that order:
//
//	0  8 magic "GOMPJSH2"   8  4 node   12 4 reserved   16 8 ring offset   24 8 ring length
//	32 8 probe address      40 8 probe value            48 1 CMA allowed   49 15 reserved
const helloSize = 64

// hello's fields.
type hello struct {
	node            int
	ringOff         int64
	ringLen         int64
	probe, probeVal uint64 // the address of a word of the sender's, and what it holds: the receiver's CMA check
	cma             bool
}

func (h *hello) put(b *[helloSize]byte) {
	*b = [helloSize]byte{}
	binary.LittleEndian.PutUint64(b[0:], ctlMagic)
	binary.LittleEndian.PutUint32(b[8:], uint32(h.node))
	binary.LittleEndian.PutUint64(b[16:], uint64(h.ringOff))
	binary.LittleEndian.PutUint64(b[24:], uint64(h.ringLen))
	binary.LittleEndian.PutUint64(b[32:], h.probe)
	binary.LittleEndian.PutUint64(b[40:], h.probeVal)
	if h.cma {
		b[48] = 1
	}
}

// parseHello decodes the hello b from node, the peer's. It checks what can be checked without the segment (whose
// size bounds the ring: mapPeer); it never panics.
func parseHello(b []byte, node int) (hello, error) {
	if len(b) != helloSize {
		return hello{}, fmt.Errorf("a bad hello: %d bytes, not %d", len(b), helloSize)
	}
	if m := binary.LittleEndian.Uint64(b[0:]); m != ctlMagic {
		return hello{}, fmt.Errorf("a bad hello: magic %#x, not %#x (another version of gompj?)", m, uint64(ctlMagic))
	}
	h := hello{node: int(binary.LittleEndian.Uint32(b[8:])), ringOff: int64(binary.LittleEndian.Uint64(b[16:])),
		ringLen: int64(binary.LittleEndian.Uint64(b[24:])), probe: binary.LittleEndian.Uint64(b[32:]),
		probeVal: binary.LittleEndian.Uint64(b[40:]), cma: b[48] == 1}
	switch {
	case h.node != node:
		return hello{}, fmt.Errorf("a bad hello: from node %d, not %d", h.node, node)
	case b[48] > 1:
		return hello{}, fmt.Errorf("a bad hello: CMA flag %d", b[48])
	case h.ringOff <= 0 || h.ringLen <= 0:
		return hello{}, fmt.Errorf("a bad hello: a ring of %d bytes at %d", h.ringLen, h.ringOff)
	}
	return h, nil
}

// attach runs the handshake on an authenticated connection: the peer's user must be ours; each end makes a ring
// for the other in its own segment and passes the segment's descriptor and its doorbell's; each maps the other's;
// each checks that it can read the other's memory (CMA).
func (e *endpoint) attach(p *peer, c *net.UnixConn) {
	if err := e.handshake(p, c); err != nil {
		c.Close()
		e.fail(p, err)
		return
	}
	p.conn = c
	e.mu.Lock()
	up := []*peer{}
	if cur := e.up.Load(); cur != nil {
		up = append(up, *cur...)
	}
	up = append(up, p)
	e.up.Store(&up)
	e.mu.Unlock()
	// One store makes the peer both ready (Ready) and reachable (peer, which sends use). With a flag of its own set
	// first, Ready could return before the peer was reachable, and a send right after it failed now and then with
	// "not connected" (TestEagerAllocs, twice in 3000 runs under the race detector and a load).
	e.ready[p.node].Store(p)
	e.signal()
	e.spawn(func() { e.watch(p) })
}

func (e *endpoint) handshake(p *peer, c *net.UnixConn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if cerr != nil {
		return fmt.Errorf("peer credentials: %w", cerr)
	}
	if int(cred.Uid) != os.Getuid() {
		return fmt.Errorf("it runs as user %d, this node as %d: shared memory is only for one user's processes", cred.Uid, os.Getuid())
	}
	p.pid = int(cred.Pid)

	e.segMu.Lock()
	off, mem, err := e.seg.addRing(ringBytes(e.opts.RingCells))
	e.segMu.Unlock()
	if err != nil {
		return err
	}
	if p.in, err = newConsumer(mem, e.maxMsg); err != nil {
		return err
	}
	var h [helloSize]byte
	(&hello{node: e.cfg.Node, ringOff: off, ringLen: int64(len(mem)), probe: uint64(uintptr(unsafe.Pointer(e.probe))),
		probeVal: *e.probe, cma: e.cma}).put(&h)
	c.SetDeadline(time.Now().Add(e.opts.HandshakeTimeout))
	defer c.SetDeadline(time.Time{})
	if _, _, err := c.WriteMsgUnix(h[:], unix.UnixRights(e.seg.fd, e.door.fd), nil); err != nil {
		return fmt.Errorf("sending the segment: %w", err)
	}
	var phb [helloSize]byte
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, flags, _, err := c.ReadMsgUnix(phb[:], oob)
	if err != nil {
		return fmt.Errorf("receiving the segment: %w", err)
	}
	fds, err := twoFds(oob[:oobn])
	if err != nil {
		return err
	}
	fd, bfd := fds[0], fds[1]
	keep := false
	defer func() {
		if !keep { // the mappings keep the segment
			unix.Close(fd)
		}
	}()
	if flags&unix.MSG_CTRUNC != 0 {
		unix.Close(bfd)
		return errors.New("a bad hello: its control message was cut short")
	}
	ph, err := parseHello(phb[:n], p.node)
	if err != nil {
		unix.Close(bfd)
		return err
	}
	if err := checkEventfd(bfd, e.door.fd); err != nil {
		unix.Close(bfd)
		return err
	}
	if p.pm, err = mapPeer(fd, ph.ringOff, ph.ringLen); err != nil {
		unix.Close(bfd)
		return err
	}
	if p.out, err = newProducer(p.pm.ring); err != nil {
		p.pm.close()
		p.pm = nil // unmapped: Close must not unmap it again
		unix.Close(bfd)
		return err
	}
	// The descriptor stays open as long as the mappings do (until the endpoint is unreachable, see Close): a
	// sender may ring with it at any time, and a closed number could be reused by another file meanwhile.
	p.bell = bell{ctl: p.pm.ctl, fd: bfd}
	p.segFd, keep = fd, true
	if e.cma && ph.cma {
		var got uint64
		err := cmaCopy(false, p.pid, unsafe.Slice((*byte)(unsafe.Pointer(&got)), 8), ph.probe)
		p.cma = err == nil && got == ph.probeVal
	}
	return nil
}

// leftovers are what a closed endpoint keeps until nothing can reach it: the mappings and the doorbells' descriptors.
type leftovers struct {
	maps [][]byte
	fds  []int
	door *doorbell
}

func release(l leftovers) {
	for _, m := range l.maps {
		unix.Munmap(m)
	}
	for _, fd := range l.fds {
		unix.Close(fd)
	}
	l.door.close()
}

// twoFds takes the two descriptors of a hello's control message (segment, doorbell). By the time we see the
// message the kernel has installed in this process every descriptor it carried (those that fit in oob; it drops
// the rest), so whatever goes wrong, every one of them that is not handed back is closed: those before a malformed
// control message, and all of them when there are not exactly two. The rights are read here rather than by
// unix.ParseSocketControlMessage and unix.ParseUnixRights, which give up on a malformed message without saying
// which descriptors came before it (and the latter would panic on a length that is not whole descriptors).
func twoFds(oob []byte) ([2]int, error) {
	var fds []int
	var bad error
	for rest := oob; len(rest) >= unix.CmsgLen(0); {
		h, data, next, err := unix.ParseOneSocketControlMessage(rest)
		if err != nil {
			bad = fmt.Errorf("a malformed control message (%w) after %d descriptors", err, len(fds))
			break
		}
		if h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_RIGHTS {
			for ; len(data) >= 4; data = data[4:] {
				fds = append(fds, int(int32(binary.NativeEndian.Uint32(data))))
			}
		}
		rest = next
	}
	if bad == nil && len(fds) != 2 {
		bad = fmt.Errorf("%d descriptors where a segment and a doorbell were expected", len(fds))
	}
	if bad != nil {
		for _, f := range fds {
			unix.Close(f)
		}
		return [2]int{-1, -1}, fmt.Errorf("the segment's descriptors: %w", bad)
	}
	return [2]int{fds[0], fds[1]}, nil
}

// watch reads the connection for the peer's goodbye; an end without one means the process died.
func (e *endpoint) watch(p *peer) {
	var b [1]byte
	for {
		n, err := p.conn.Read(b[:])
		if n == 1 && b[0] == bye {
			p.state.CompareAndSwap(stateUp, stateClosing)
		} else if err != nil || n == 1 {
			if err == nil {
				err = errors.New("garbage on its connection")
			}
			if p.state.Load() == stateUp {
				p.why.Store(fmt.Errorf("its connection ended without a goodbye (process died?): %w", err))
				p.state.CompareAndSwap(stateUp, stateLost)
			}
		}
		if p.state.Load() != stateUp {
			e.Wake()
			if err != nil || p.state.Load() == stateLost {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Ready implements rdma.Endpoint.
func (e *endpoint) Ready(timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		e.mu.Lock()
		ch := e.changed
		var missing []int
		var errs []error
		for _, p := range e.byNode {
			switch {
			case p == nil:
			case p.err != nil:
				errs = append(errs, p.err)
			case e.peer(p.node) == nil:
				missing = append(missing, p.node)
			}
		}
		e.mu.Unlock()
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-t.C:
			return fmt.Errorf("shm: node %d: no shared memory with node(s) %v after %v", e.cfg.Node, missing, timeout)
		}
	}
}

func (e *endpoint) PeerRMA(node int) bool {
	p := e.peer(node)
	return p != nil && p.cma
}

func (e *endpoint) peer(node int) *peer {
	if node < 0 || node >= len(e.ready) {
		return nil
	}
	return e.ready[node].Load()
}

type mr struct{}

func (mr) Key() uint64                  { return 0 }
func (mr) Desc() unsafe.Pointer         { return nil }
func (mr) Addr(p unsafe.Pointer) uint64 { return uint64(uintptr(p)) }
func (mr) Close() error                 { return nil }

// Register implements rdma.Endpoint. Memory this endpoint lent gets a key that names its place in the segment
// (heap.go); other memory needs no registration: CMA names it by address.
func (e *endpoint) Register(b []byte, _ rdma.Access) (rdma.MR, error) {
	if off, ok := e.offsetOf(b); ok {
		return lentMR{delta: off - int64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))}, nil
	}
	return mr{}, nil
}

func (e *endpoint) PostRecv(b []byte, _ rdma.MR, ctx uint64) error {
	e.postMu.Lock()
	e.posted = append(e.posted, postedBuf{b, ctx})
	e.postMu.Unlock()
	return nil
}

func (e *endpoint) takePosted() (postedBuf, bool) {
	e.postMu.Lock()
	defer e.postMu.Unlock()
	n := len(e.posted)
	if n == 0 {
		return postedBuf{}, false
	}
	b := e.posted[n-1] // the most recently returned buffer is the one still in cache
	e.posted = e.posted[:n-1]
	return b, true
}

// push puts a message in node's ring and wakes it if it sleeps.
func (e *endpoint) push(node int, call string, hdr, payload []byte) error {
	if e.closed.Load() {
		return &rdma.OpError{Call: call, Node: node, Err: errors.New("endpoint closed")}
	}
	p := e.peer(node)
	switch {
	case p == nil:
		return &rdma.OpError{Call: call, Node: node, Err: errors.New("not connected")}
	case p.state.Load() != stateUp || p.broken.Load():
		return &rdma.OpError{Call: call, Node: node, Err: errors.New("unreachable")}
	}
	err := p.out.push(hdr, payload)
	switch {
	case err == nil:
	case err == errAgain:
		p.full.Store(true)
		p.bell.wake() // it has work: let it drain
		return rdma.ErrAgain
	case errors.Is(err, ErrCorrupt):
		p.why.Store(err)
		p.broken.Store(true)
		p.state.CompareAndSwap(stateUp, stateLost)
		e.Wake()
		return &rdma.OpError{Call: call, Node: node, Err: err}
	default:
		return &rdma.OpError{Call: call, Node: node, Err: err}
	}
	if p.full.Load() {
		p.full.Store(false)
	}
	p.bell.wake()
	return nil
}

func (e *endpoint) Inject(node int, hdr, payload []byte) error {
	return e.push(node, "inject", hdr, payload)
}

func (e *endpoint) Send(node int, b []byte, _ rdma.MR, ctx uint64) error {
	if err := e.push(node, "send", b, nil); err != nil {
		return err
	}
	e.complete(rdma.Completion{Op: rdma.OpSend, Ctx: ctx, Node: node})
	return nil
}

func (e *endpoint) complete(c rdma.Completion) {
	e.locMu.Lock()
	e.local = append(e.local, c)
	e.hasLocal.Store(true)
	e.locMu.Unlock()
	e.self.wake()
}

// cmaPeer returns the peer a CMA copy toward node goes to, with the system call's name and the operation for its
// completion, or an error if CMA does not reach that node.
func (e *endpoint) cmaPeer(write bool, node int) (p *peer, call string, op rdma.Op, err error) {
	call, op = "process_vm_readv", rdma.OpRead
	if write {
		call, op = "process_vm_writev", rdma.OpWrite
	}
	if p = e.peer(node); p == nil || !p.cma {
		return nil, call, op, &rdma.OpError{Call: call, Node: node, Err: errors.New("no CMA toward this node")}
	}
	return p, call, op, nil
}

// rma copies, here and now, and reports the outcome as a completion: between mappings where the peer's memory is
// lent (rkey, heap.go), else with CMA.
func (e *endpoint) rma(write bool, node int, local []byte, raddr, rkey, ctx uint64) error {
	if p := e.peer(node); p != nil && rkey&keyLent != 0 && len(local) > 0 {
		if w, err := p.lentRange(int64(raddr)+deltaOf(rkey), len(local)); err == nil {
			op := rdma.OpRead
			if write {
				mem.Copy(w, local)
				op = rdma.OpWrite
			} else {
				mem.Copy(local, w)
			}
			e.complete(rdma.Completion{Op: op, Ctx: ctx, Node: node})
			return nil
		}
		// CMA names the same bytes by their address in the peer.
	}
	p, call, op, err := e.cmaPeer(write, node)
	if err != nil {
		return err
	}
	if len(local) > 0 {
		if err = cmaCopy(write, p.pid, local, raddr); err != nil {
			err = &rdma.OpError{Call: call, Node: node, Err: err}
		}
	}
	e.complete(rdma.Completion{Op: op, Ctx: ctx, Node: node, Err: err})
	return nil
}

func (e *endpoint) Write(node int, local []byte, _ rdma.MR, raddr, rkey uint64, ctx uint64) error {
	return e.rma(true, node, local, raddr, rkey, ctx)
}

func (e *endpoint) Read(node int, local []byte, _ rdma.MR, raddr, rkey uint64, ctx uint64) error {
	return e.rma(false, node, local, raddr, rkey, ctx)
}

// Readv implements rdma.VectorRMA: process_vm_readv into many local buffers (64 a call).
func (e *endpoint) Readv(node int, locals [][]byte, raddr, _ uint64, ctx uint64) error {
	return e.rmav(false, node, locals, raddr, ctx)
}

// Writev implements rdma.VectorRMA: process_vm_writev from many local buffers (64 a call).
func (e *endpoint) Writev(node int, locals [][]byte, raddr, _ uint64, ctx uint64) error {
	return e.rmav(true, node, locals, raddr, ctx)
}

func (e *endpoint) rmav(write bool, node int, locals [][]byte, raddr, ctx uint64) error {
	p, call, op, err := e.cmaPeer(write, node)
	if err != nil {
		return err
	}
	if cerr := cmaCopyv(write, p.pid, locals, raddr); cerr != nil {
		err = &rdma.OpError{Call: call, Node: node, Err: cerr}
	}
	e.complete(rdma.Completion{Op: op, Ctx: ctx, Node: node, Err: err})
	return nil
}

// Poll implements rdma.Endpoint: completions made here first, then the rings (from a rotating first peer), then
// the peers that closed or were lost, once their ring is drained.
//
// It takes no lock against Close: the device never polls once Close has begun (rdma.Endpoint).
func (e *endpoint) Poll(cs []rdma.Completion) (int, error) {
	n := 0
	if e.hasLocal.Load() {
		e.locMu.Lock()
		k := copy(cs, e.local)
		e.local = append(e.local[:0], e.local[k:]...)
		e.hasLocal.Store(len(e.local) > 0)
		e.locMu.Unlock()
		n = k
	}
	up := e.up.Load()
	if up == nil {
		return n, nil
	}
	peers := *up
	if e.next >= len(peers) {
		e.next = 0 // the peers changed
	}
	for i := range peers {
		if n == len(cs) {
			break
		}
		// Round robin from e.next, without a division per Poll (a poll of an empty ring is a few loads).
		k := e.next + i
		if k >= len(peers) {
			k -= len(peers)
		}
		p := peers[k]
		if p.told.Load() {
			continue
		}
		inPlace := e.take != nil
		for n < len(cs) {
			ln, ok, err := p.in.peek()
			if err != nil {
				p.why.Store(fmt.Errorf("%w (from node %d)", err, p.node))
				p.state.Store(stateLost)
				break
			}
			if !ok {
				break
			}
			if inPlace {
				if m, ok := p.in.view(ln); ok && e.take(p.node, m) {
					if p.in.release(ln) {
						p.bell.wake() // it waits for room in this ring (ring.go)
					}
					continue
				}
				inPlace = false // this one is received as usual, and so is the rest of the ring: in order
			}
			b, have := e.takePosted()
			if !have {
				break
			}
			if ln > len(b.b) {
				e.PostRecv(b.b, nil, b.ctx)
				p.why.Store(fmt.Errorf("%w: a message of %d bytes from node %d, over the %d its receives hold", ErrCorrupt, ln, p.node, len(b.b)))
				p.state.Store(stateLost)
				break
			}
			if p.in.consume(b.b, ln) {
				p.bell.wake() // it waits for room in this ring (ring.go)
			}
			cs[n] = rdma.Completion{Op: rdma.OpRecv, Ctx: b.ctx, Node: p.node, Len: ln}
			n++
		}
		// A goodbye is told once the ring is drained: what the peer sent before it comes first.
		if st := p.state.Load(); st != stateUp && n < len(cs) && (st == stateLost || !p.in.ready()) {
			p.told.Store(true)
			if st == stateLost {
				err, _ := p.why.Load().(error)
				cs[n] = rdma.Completion{Op: rdma.OpPeerLost, Node: p.node, Err: err}
			} else {
				cs[n] = rdma.Completion{Op: rdma.OpPeerClosed, Node: p.node}
			}
			n++
		}
	}
	if e.next++; e.next == len(peers) {
		e.next = 0
	}
	return n, nil
}

var _ rdma.InPlacer = (*endpoint)(nil)

// OfferInPlace implements rdma.InPlacer: Poll offers take each message where it lies in its ring first.
func (e *endpoint) OfferInPlace(take func(node int, m []byte) bool) { e.take = take }

// work reports whether Poll would find something, or a ring that was full toward a peer has room again (the
// device then sends what it holds back).
func (e *endpoint) work() bool {
	if e.hasLocal.Load() {
		return true
	}
	if up := e.up.Load(); up != nil {
		for _, p := range *up {
			if !p.told.Load() && (p.in.ready() || p.state.Load() != stateUp) {
				return true
			}
			if p.full.Load() && p.out.room() {
				p.full.Store(false) // once: what the device holds back is retried now, and a failed retry raises it again
				return true
			}
		}
	}
	return false
}

// Wait implements rdma.Endpoint: a sleep on the doorbell (parked in Go's netpoller), which producers ring only
// while the sleeping flag is up, so that a busy ring costs no system call.
func (e *endpoint) Wait(timeout time.Duration) {
	s := u32(e.self.ctl, ctlSleeping)
	atomic.StoreUint32(s, 1)
	if !e.woken.Swap(false) && !e.work() {
		e.door.sleep(timeout)
	}
	atomic.StoreUint32(s, 0)
	e.woken.Store(false)
}

// Wake implements rdma.Endpoint.
func (e *endpoint) Wake() {
	e.woken.Store(true)
	e.self.wake() // the control page stays mapped, and the eventfd open, as long as e is reachable
}

// Close implements rdma.Endpoint: a goodbye on every connection, then the sockets and mappings go.
func (e *endpoint) Close() error {
	e.mu.Lock()
	if e.quitting {
		e.mu.Unlock()
		return nil
	}
	e.quitting = true
	close(e.quit)
	peers := append([]*peer(nil), e.byNode...)
	e.mu.Unlock()
	e.ln.Close()
	for _, p := range peers {
		if p != nil && e.peer(p.node) != nil {
			p.conn.SetWriteDeadline(time.Now().Add(time.Second))
			p.conn.Write([]byte{bye})
		}
	}
	e.mu.Lock()
	for c := range e.conns {
		c.Close() // handshakes under way end too
	}
	e.mu.Unlock()
	e.wg.Wait()
	e.closed.Store(true)
	e.self.ring() // a Wait under way ends
	// Unmap, and close the doorbells, once nothing can reach the endpoint any more (see closed).
	l := leftovers{door: e.door}
	for _, p := range peers {
		if p != nil && p.pm != nil {
			l.maps = append(l.maps, p.pm.ctl, p.pm.ring[:cap(p.pm.ring)])
			if p.bell.fd >= 0 {
				l.fds = append(l.fds, p.bell.fd)
			}
			if p.segFd >= 0 {
				l.fds = append(l.fds, p.segFd)
			}
			p.winMu.Lock()
			l.maps = append(l.maps, p.wins...)
			p.wins, p.win, p.seen, p.winsGone = nil, nil, 0, true
			p.winMu.Unlock()
		}
	}
	e.segMu.Lock()
	l.maps = append(l.maps, e.seg.maps...)
	e.seg.maps = nil
	e.seg.close() // the descriptor; the mappings keep the memory (and the leases of Alloc stay mapped)
	e.segMu.Unlock()
	runtime.AddCleanup(e, release, l)
	return nil
}

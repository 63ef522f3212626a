//go:build linux

package netdev

import (
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/internal/pool"
	"github.com/gompj/gompj/netdev/auth"
)

// Purpose is the handshake label of node-to-node connections (see package auth).
const Purpose = "netdev"

// Defaults for the zero values of Config.
const (
	DefaultEagerLimit       = 128 << 10
	DefaultUnexpectedLimit  = 64 << 20
	DefaultChunkSize        = 1 << 20
	DefaultMaxMessage       = 1 << 40
	DefaultBusyPoll         = 50 * time.Microsecond
	DefaultHandshakeTimeout = 5 * time.Second
	DefaultConnectTimeout   = 30 * time.Second
	DefaultCloseTimeout     = 10 * time.Second
)

// creditOverhead is charged per eager message on top of its payload, so that floods of empty messages are bounded
// too (it stands for the Inbound and the queue entry the receiver keeps).
const creditOverhead = 64

// maxWindow caps the grant per peer (256 TiB, beyond any real memory), so that the credit arithmetic (window plus
// overdraft plus one message, see peer.heldMax) cannot overflow an int64 whatever UnexpectedLimit says.
const maxWindow = 1 << 48

// Config describes one node's device. Every node of a job must use the same Stripes, EagerLimit, UnexpectedLimit,
// ChunkSize and limits.
type Config struct {
	Node   int           // this node's id, in [0, Nodes)
	Nodes  int           // how many nodes the job has
	Ranks  int           // world size
	NodeOf func(int) int // world rank -> node id, for every rank in [0, Ranks)
	Secret []byte        // the job secret (at least auth.MinSecret bytes)

	// Listener, if set, is this node's already-bound listener. Otherwise Open listens on Listen (host:port). The
	// device closes it on Close; its address is the device's Address.
	Listener net.Listener
	Listen   string

	Stripes         int           // connections per node pair (default 1)
	Lazy            bool          // connect to a node on the first frame for it, not in New
	EagerLimit      int           // largest eager payload (default 128 KiB)
	UnexpectedLimit int64         // unexpected eager bytes a node holds, split evenly over its peers (default 64 MiB)
	ChunkSize       int           // largest rendezvous DATA frame (default 1 MiB)
	MaxMessage      uint64        // largest rendezvous message accepted (default 1 TiB)
	BusyPoll        time.Duration // poll without sleeping this long after the last event (default 50µs; <0 disables)
	// Congestion is the TCP congestion control of the device's connections (sys.go: congestionFor): "" or
	// CongestionAuto, Reno on connections within this host and the kernel's default to other hosts;
	// CongestionSystem, the kernel's default everywhere; any other value, that algorithm on every connection.
	Congestion string

	HandshakeTimeout time.Duration // per connection (default 5 s)
	ConnectTimeout   time.Duration // a peer not connected by then is lost (default 30 s)
	CloseTimeout     time.Duration // how long Close waits for in-flight traffic and goodbyes (default 10 s)
}

// ErrPeerLost is wrapped by errors about a node whose connection failed.
var ErrPeerLost = errors.New("netdev: peer lost")

// ErrPeerClosed is wrapped by errors about a node that closed its device cleanly.
var ErrPeerClosed = errors.New("netdev: peer closed")

// PeerError names the node (and its address) an error is about.
type PeerError struct {
	Node int
	Addr string
	Kind error // ErrPeerLost or ErrPeerClosed
	Err  error // the cause
}

func (e *PeerError) Error() string {
	what := "lost"
	if e.Kind == ErrPeerClosed {
		what = "closed"
	}
	return fmt.Sprintf("netdev: %s node %d (%s): %v", what, e.Node, e.Addr, e.Err)
}

func (e *PeerError) Unwrap() []error { return []error{e.Kind, e.Err} }

// Stats are counters for tests and diagnostics.
type Stats struct {
	Rejected  int64 // inbound connections that failed the handshake
	Conns     int64 // authenticated connections attached
	PeersLost int64
}

// Device is a node's TCP network device. It implements device.Device.
type Device struct {
	cfg      Config
	self     int
	nnodes   int
	ranks    int
	rankNode []int32
	sink     device.Sink
	claimer  device.EagerClaimer // the sink, if it matches eager messages at their header
	peers    []*peer             // nil at index self
	eager    int
	window   int64                         // receive credit granted to each peer
	batch    int64                         // owed credit that triggers a standalone credit frame
	busyPoll atomic.Int64                  // how long the loop polls after the last event before it sleeps (ns; <= 0: not at all)
	idle     device.IdleYield              // driving Polls in a row that found nothing (yieldEvery)
	helper   atomic.Pointer[device.Helper] // SetHelper's: what the loop runs between rounds
	ln       net.Listener

	nodeRanks []int // how many ranks each node has
	// overdraft is how far below zero this node's senders may take the credit toward a peer: the eager messages
	// of ranks that raced past EagerLimit together (see takeCredit). Every peer allows it (see peer.heldMax).
	overdraft int64

	started      bool // Start ran (set before any goroutine of the device exists)
	seq          atomic.Uint64
	closing      atomic.Bool
	inflightRdv  atomic.Int64
	inflightRecv atomic.Int64 // rendezvous receives cleared and not yet complete (len of the peers' rdvRecv)
	rejected     atomic.Int64
	attached     atomic.Int64
	lostCount    atomic.Int64

	inPool    inboundPool
	bufs      bufPool
	releaseFn func(*device.Inbound)

	ep    int      // epoll: the connections, polled by the loop and by driving ranks
	outer int      // the loop's epoll set: ep and evfd, so that only the loop sees evfd
	sleep *sleeper // outer in the netpoller, where the loop sleeps
	evfd  int      // wakes the loop: posted tasks, a rank that starts to drive

	taskMu    sync.Mutex
	evClosed  bool
	connTimer *time.Timer
	tasks     []func()
	spare     []func()

	goMu     sync.Mutex // guards goClosed, wg.Add and hsConns
	goClosed bool
	wg       sync.WaitGroup
	hsConns  map[net.Conn]struct{}
	quit     chan struct{}

	stateMu sync.Mutex
	stateCh chan struct{} // closed and replaced whenever connectivity changes

	closeOnce sync.Once
	closeErr  error
	loopDone  chan struct{}

	// Driving (device.Poller): ranks that wait on the network poll the device themselves while the loop stands down.
	drivers     atomic.Int32  // ranks between Enter and Leave
	loopBlocked atomic.Bool   // the loop is in a blocking epoll_wait
	standing    atomic.Bool   // the loop has stood down for driving ranks (tests wait for it)
	kick        chan struct{} // resumes a loop that stood down (capacity 1)

	// Owned by the progress loop: guarded by pollMu, held by the loop or by a rank in Poll.
	pollMu      sync.Mutex
	loopHandles atomic.Int64 // since when (clock) the loop holds pollMu to handle events; 0: it does not
	epoch       time.Time
	evs         []unix.EpollEvent // Poll's and the loop's non-blocking rounds
	loopEvs     []unix.EpollEvent // the loop's blocking epoll_wait, which runs without pollMu (loop only)
	lastActive  time.Time
	conns       map[int32]*conn
	readable    []*conn // the registered connections, for Poll's direct reads
	polls       uint64
	nextID      int32
	pendingRead []*conn
	loopExited  bool
	closeState  int
	drainUntil  time.Time
	byeUntil    time.Time
	closeReport error
}

type peer struct {
	id    int
	addr  string
	slots []*conn // per stripe: the connection this node's frames to the peer go on

	credit atomic.Int64 // send credit left toward the peer
	owed   atomic.Int64 // receive credit to return to the peer
	// held is the eager cost received from the peer and not yet released (counted at the frame's header, given
	// back in returnCredit); heldMax is the most a correct peer can have outstanding toward us (see conn.header).
	held    atomic.Int64
	heldMax int64

	mu       sync.Mutex
	err      error // set once: the peer is lost or closed
	syncWait map[uint64]*syncEntry
	rdvSend  map[uint64]*rdvSend
	rdvRecv  map[uint64]*rdvRecv

	// Owned by the progress loop.
	conns  []*conn // every attached connection (slots and extras)
	failed bool
}

type syncEntry struct {
	h    device.Header
	done device.Completer
}

// rdvSend is a rendezvous send: waiting for its CTS in peer.rdvSend, then streamed by a connection's queue.
type rdvSend struct {
	h       device.Header
	payload device.Payload
	done    device.Completer
	stripe  int
	// streaming state, under the connection's mutex
	sent     int
	chunkEnd int
	inChunk  bool
	hoff     int
	hdr      [HeaderSize]byte
	// a segmented payload: decided at its first write whether its pieces go out as they are (writev) or, being
	// tiny, are packed through stage, stageSize bytes at a time (bytes [stageOff, stageEnd) of the payload)
	decided, staged    bool
	stage              *[]byte
	stageOff, stageEnd int
}

// sendPool and recvPool hold the rendezvous records of transfers that ended well, for the next ones: a rendezvous
// allocates nothing at steady state (a persistent collective's Start, AllocsPerRun). A record goes back only where
// nothing else can reach it any more: a send once its stream is all in the socket and completed (finishStreams; a
// cleared empty one at once), a receive once its last byte is in and it is completed. Those that fail (a lost
// peer, a refused post) are left to the collector.
var (
	sendPool pool.Of[rdvSend]
	recvPool pool.Of[rdvRecv]
)

// truncate cuts the payload to its first n bytes (n <= its size), what a receiver with a short buffer takes. It is
// called before the stream starts.
func (s *rdvSend) truncate(n int) {
	if s.payload.Segmented() {
		s.payload.Len = n
	} else {
		s.payload.Bytes = s.payload.Bytes[:n]
	}
}

type rdvRecv struct {
	h    device.Header
	dst  device.Payload
	got  int
	done device.Completer
	// a segmented destination whose pieces are large: read into with readv; tiny ones take the read buffer
	direct bool
}

func (c *Config) fill() error {
	if c.Stripes == 0 {
		c.Stripes = 1
	}
	if c.EagerLimit == 0 {
		c.EagerLimit = DefaultEagerLimit
	}
	if c.UnexpectedLimit == 0 {
		c.UnexpectedLimit = DefaultUnexpectedLimit
	}
	if c.ChunkSize == 0 {
		c.ChunkSize = DefaultChunkSize
	}
	if c.MaxMessage == 0 {
		c.MaxMessage = DefaultMaxMessage
	}
	if c.BusyPoll == 0 {
		c.BusyPoll = DefaultBusyPoll
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.CloseTimeout == 0 {
		c.CloseTimeout = DefaultCloseTimeout
	}
	switch {
	case c.Nodes <= 0:
		return fmt.Errorf("netdev: %d nodes", c.Nodes)
	case c.Node < 0 || c.Node >= c.Nodes:
		return fmt.Errorf("netdev: node %d outside [0,%d)", c.Node, c.Nodes)
	case c.Ranks <= 0 || c.Ranks > math.MaxInt32:
		return fmt.Errorf("netdev: world size %d", c.Ranks)
	case c.NodeOf == nil:
		return errors.New("netdev: no rank layout (NodeOf)")
	case c.Stripes < 0 || c.Stripes > 64:
		return fmt.Errorf("netdev: %d stripes (1..64)", c.Stripes)
	case c.EagerLimit < 0 || c.EagerLimit > 1<<30:
		return fmt.Errorf("netdev: eager limit %d", c.EagerLimit)
	case c.ChunkSize <= 0 || c.ChunkSize > 1<<30:
		return fmt.Errorf("netdev: chunk size %d", c.ChunkSize)
	case c.UnexpectedLimit < 0:
		return fmt.Errorf("netdev: unexpected limit %d", c.UnexpectedLimit)
	}
	if err := checkCongestion(c.Congestion); err != nil {
		return err
	}
	if len(c.Secret) < auth.MinSecret {
		return fmt.Errorf("netdev: job secret of %d bytes is too short (at least %d)", len(c.Secret), auth.MinSecret)
	}
	return nil
}

// Open opens node cfg.Node's device: it listens (or takes cfg.Listener) and knows its Address, but connects to
// nothing and delivers nothing before Start.
func Open(cfg Config) (*Device, error) {
	d, err := newDevice(cfg)
	if err != nil {
		if cfg.Listener != nil {
			cfg.Listener.Close()
		}
		return nil, err
	}
	d.ln = cfg.Listener
	if d.ln == nil {
		if d.ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return nil, fmt.Errorf("netdev: node %d: %w", d.self, err)
		}
	}
	return d, nil
}

// Address implements device.Transport: the host:port the device listens on.
func (d *Device) Address() []byte { return []byte(d.ln.Addr().String()) }

// Describe implements device.Describer.
func (d *Device) Describe() string {
	if d.cfg.Stripes > 1 {
		return fmt.Sprintf("tcp (%d stripes)", d.cfg.Stripes)
	}
	return "tcp"
}

// Start implements device.Transport: it starts the progress loop and, unless cfg.Lazy, connects to every node it
// serves with a lower id (those with higher ids connect to it). addrs[n] is node n's host:port, nil for the nodes
// this device does not serve. Frames for a node not yet connected are queued; WaitConnected waits for the mesh.
func (d *Device) Start(sink device.Sink, addrs [][]byte) error {
	if d.started {
		return errors.New("netdev: started twice")
	}
	if err := d.bind(sink, addrs); err != nil {
		d.ln.Close()
		return err
	}
	d.started = true
	return d.start()
}

// bind sets the sink and the peers this device serves (tests and fuzz targets drive a bound device directly).
func (d *Device) bind(sink device.Sink, addrs [][]byte) error {
	if sink == nil {
		return errors.New("netdev: no Sink")
	}
	if len(addrs) != d.nnodes {
		return fmt.Errorf("netdev: %d addresses for %d nodes", len(addrs), d.nnodes)
	}
	d.sink = sink
	d.claimer, _ = sink.(device.EagerClaimer)
	d.peers = make([]*peer, d.nnodes)
	for i, a := range addrs {
		if i == d.self || a == nil {
			continue
		}
		addr := string(a)
		if _, _, err := net.SplitHostPort(addr); err != nil || len(a) > 256 {
			return fmt.Errorf("netdev: node %d's address %q is not host:port", i, a)
		}
		p := &peer{
			id:       i,
			addr:     addr,
			syncWait: map[uint64]*syncEntry{},
			rdvSend:  map[uint64]*rdvSend{},
			rdvRecv:  map[uint64]*rdvRecv{},
		}
		// Every node starts with the same grant (the configs agree); credit returns keep it topped up.
		p.credit.Store(d.window)
		// The peer's senders overdraw their credit by at most their own node's overdraft (the layout is the
		// same on every node, so this is the figure the peer computes for itself).
		p.heldMax = d.window + overdraftOf(d.nodeRanks[i], d.eager)
		for s := range d.cfg.Stripes {
			p.slots = append(p.slots, d.newConn(p, s))
		}
		d.peers[i] = p
	}
	return nil
}

// newDevice builds the device's state without any socket.
func newDevice(cfg Config) (*Device, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	d := &Device{
		cfg:      cfg,
		self:     cfg.Node,
		nnodes:   cfg.Nodes,
		ranks:    cfg.Ranks,
		rankNode: make([]int32, cfg.Ranks),
		eager:    cfg.EagerLimit,
		hsConns:  map[net.Conn]struct{}{},
		quit:     make(chan struct{}),
		stateCh:  make(chan struct{}),
		loopDone: make(chan struct{}),
		kick:     make(chan struct{}, 1),
		evs:      make([]unix.EpollEvent, 128),
		loopEvs:  make([]unix.EpollEvent, 2),
		conns:    map[int32]*conn{},
		nextID:   1,
		ep:       -1,
		evfd:     -1,
		outer:    -1,
		epoch:    time.Now(),
	}
	d.busyPoll.Store(int64(cfg.BusyPoll))
	d.releaseFn = d.release
	d.nodeRanks = make([]int, cfg.Nodes)
	for r := range cfg.Ranks {
		n := cfg.NodeOf(r)
		if n < 0 || n >= d.nnodes {
			return nil, fmt.Errorf("netdev: layout puts rank %d on node %d, outside [0,%d)", r, n, d.nnodes)
		}
		d.rankNode[r] = int32(n)
		d.nodeRanks[n]++
	}
	// The grant divides the limit by every other node, whichever device serves them, so that both ends of a pair
	// compute the same grant.
	if d.nnodes > 1 {
		d.window = min(cfg.UnexpectedLimit/int64(d.nnodes-1), maxWindow)
	}
	d.batch = max(d.window/4, 1)
	d.overdraft = overdraftOf(d.nodeRanks[d.self], d.eager)
	return d, nil
}

// start opens the epoll set and starts the loop, the accept loop and the dials.
func (d *Device) start() error {
	cfg := &d.cfg
	var err error
	if d.ep, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return fmt.Errorf("netdev: epoll: %w", err)
	}
	if d.evfd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		unix.Close(d.ep)
		return fmt.Errorf("netdev: eventfd: %w", err)
	}
	if d.outer, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		unix.Close(d.ep)
		unix.Close(d.evfd)
		return fmt.Errorf("netdev: epoll: %w", err)
	}
	evEv := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(d.evfd)}
	epEv := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(d.ep)}
	if err = unix.EpollCtl(d.outer, unix.EPOLL_CTL_ADD, d.evfd, &evEv); err == nil {
		err = unix.EpollCtl(d.outer, unix.EPOLL_CTL_ADD, d.ep, &epEv)
	}
	if err != nil {
		unix.Close(d.outer)
		unix.Close(d.ep)
		unix.Close(d.evfd)
		return fmt.Errorf("netdev: epoll add: %w", err)
	}
	if d.sleep, err = newSleeper(d.outer, d.loopEvs); err != nil { // it owns outer from here on
		unix.Close(d.ep)
		unix.Close(d.evfd)
		return err
	}
	go d.loop()
	d.spawn(d.acceptLoop)
	if !cfg.Lazy {
		for j := 0; j < d.self; j++ {
			if d.peers[j] == nil {
				continue
			}
			for s := range cfg.Stripes {
				p, s := d.peers[j], s
				p.slots[s].dialing = true
				d.spawn(func() { d.dial(p, s) })
			}
		}
		d.connTimer = time.AfterFunc(cfg.ConnectTimeout, func() { d.post(d.checkConnectTimeout) })
	}
	return nil
}

// Addr is the address the device listens on.
func (d *Device) Addr() net.Addr { return d.ln.Addr() }

// Stats returns the device's counters.
func (d *Device) Stats() Stats {
	return Stats{Rejected: d.rejected.Load(), Conns: d.attached.Load(), PeersLost: d.lostCount.Load()}
}

// spawn runs f in a goroutine that Close waits for; it returns false once Close has begun.
func (d *Device) spawn(f func()) bool {
	d.goMu.Lock()
	defer d.goMu.Unlock()
	if d.goClosed {
		return false
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		f()
	}()
	return true
}

// track registers a connection in handshake so that Close can abort it; it reports false once Close has begun.
func (d *Device) track(nc net.Conn, on bool) bool {
	d.goMu.Lock()
	defer d.goMu.Unlock()
	if !on {
		delete(d.hsConns, nc)
		return true
	}
	if d.goClosed {
		return false
	}
	d.hsConns[nc] = struct{}{}
	return true
}

// post hands f to the progress loop.
func (d *Device) post(f func()) {
	d.taskMu.Lock()
	defer d.taskMu.Unlock()
	if d.evClosed {
		return // the loop is gone; Close has failed or closed everything
	}
	d.tasks = append(d.tasks, f)
	var one = [8]byte{1}
	unix.Write(d.evfd, one[:])
	select { // a loop that stood down for driving ranks takes the task itself
	case d.kick <- struct{}{}:
	default:
	}
}

func (d *Device) signalState() {
	d.stateMu.Lock()
	close(d.stateCh)
	d.stateCh = make(chan struct{})
	d.stateMu.Unlock()
}

// WaitConnected waits until every connection of the mesh is up (immediately in lazy mode). It fails if a peer is
// lost or the timeout passes, naming the nodes still missing.
func (d *Device) WaitConnected(timeout time.Duration) error {
	if d.cfg.Lazy {
		return nil
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		d.stateMu.Lock()
		ch := d.stateCh
		d.stateMu.Unlock()
		var missing []int
		for _, p := range d.peers {
			if p == nil {
				continue
			}
			p.mu.Lock()
			perr := p.err
			p.mu.Unlock()
			if perr != nil {
				return perr
			}
			for _, c := range p.slots {
				c.mu.Lock()
				up := c.fd >= 0
				c.mu.Unlock()
				if !up {
					missing = append(missing, p.id)
					break
				}
			}
		}
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-deadline.C:
			return fmt.Errorf("netdev: node %d: not connected to node(s) %v after %v", d.self, missing, timeout)
		}
	}
}

// Close delivers every frame already handed to the device (flushes the queues, waits for rendezvous in flight, up
// to CloseTimeout), says goodbye on every connection so that peers see a clean close, then closes them. It is
// idempotent.
func (d *Device) Close() error {
	d.closeOnce.Do(func() {
		d.closing.Store(true)
		if !d.started {
			if d.ln != nil {
				d.ln.Close()
			}
			return
		}
		d.post(d.beginClose)
		<-d.loopDone
		d.goMu.Lock()
		d.goClosed = true
		for nc := range d.hsConns {
			nc.Close()
		}
		d.goMu.Unlock()
		close(d.quit)
		d.ln.Close()
		d.wg.Wait()
		// Connections authenticated after the loop stopped: run their attach tasks, which now just close them.
		if d.connTimer != nil {
			d.connTimer.Stop()
		}
		d.runTasks()
		d.taskMu.Lock()
		d.evClosed = true
		unix.Close(d.evfd)
		d.taskMu.Unlock()
		d.runTasks()
		if d.sleep != nil {
			d.sleep.close()
		}
		unix.Close(d.ep)
		d.closeErr = d.closeReport
	})
	return d.closeErr
}

func (d *Device) peerOf(rank int32, what string) (*peer, error) {
	if rank < 0 || int(rank) >= d.ranks {
		return nil, fmt.Errorf("netdev: %s rank %d outside [0,%d)", what, rank, d.ranks)
	}
	n := int(d.rankNode[rank])
	if n == d.self {
		return nil, fmt.Errorf("netdev: %s rank %d lives on this node (%d); local traffic does not use the device", what, rank, d.self)
	}
	if d.peers == nil || d.peers[n] == nil {
		return nil, fmt.Errorf("netdev: %s rank %d lives on node %d, which this device does not serve", what, rank, n)
	}
	return d.peers[n], nil
}

func stripeOf(src, dst int32, n int) int {
	if n == 1 {
		return 0
	}
	x := uint32(src)*0x9E3779B1 ^ uint32(dst)*0x85EBCA77
	x ^= x >> 15
	x *= 0x2C1B3C6D
	x ^= x >> 12
	return int(x % uint32(n))
}

// SendEager implements device.Device.
func (d *Device) SendEager(h *device.Header, payload []byte, done device.Completer) error {
	return d.sendEager(h, device.Contiguous(payload), done)
}

// SendEagerv implements device.Segmented: pieces go out as they are, tiny ones packed first (see stageBelow).
func (d *Device) SendEagerv(h *device.Header, payload device.Payload, done device.Completer) error {
	if payload.Segmented() && payload.Len > 0 {
		if tiny(payload, 0, payload.Len) {
			buf := d.bufs.get(payload.Len)
			b := (*buf)[:payload.Len]
			payload.Gather(0, b)
			err := d.sendEager(h, device.Contiguous(b), done)
			*buf = (*buf)[:0]
			d.bufs.put(buf)
			return err
		}
	}
	return d.sendEager(h, payload, done)
}

func (d *Device) sendEager(h *device.Header, payload device.Payload, done device.Completer) error {
	if d.closing.Load() {
		return device.ErrClosed
	}
	if h == nil {
		return errors.New("netdev: nil header")
	}
	size := payload.Size()
	if size > d.eager {
		return fmt.Errorf("netdev: eager payload of %d bytes over the limit %d", size, d.eager)
	}
	if err := d.checkSource(h.Source); err != nil {
		return err
	}
	p, err := d.peerOf(h.Dest, "destination")
	if err != nil {
		return err
	}
	sync := h.Flags&device.FlagSync != 0 && done != nil
	cost := int64(size + creditOverhead)
	if !p.takeCredit(cost, d.overdraft) {
		// More senders than the overdraft allows for raced past EagerLimit (extra goroutines of a rank, the worker
		// pool's nonblocking collectives), or the caller did not ask it: the message goes by rendezvous, which
		// needs no credit, from a copy (the caller may reuse its buffer once we return). The peer would fail us as
		// a bad frame rather than hold it eager. A synchronous send completes once it is matched, as an eager one
		// does at its ACK.
		cp := make([]byte, size)
		payload.Gather(0, cp)
		rh := *h
		rh.Flags &^= device.FlagSync // a rendezvous is synchronous by itself: nothing to ACK
		var rdone device.Completer
		if sync {
			rdone = done
		}
		if err := d.sendRendezvous(&rh, device.Contiguous(cp), rdone); err != nil {
			return err
		}
		if !sync && done != nil {
			done.Complete(nil)
		}
		return nil
	}
	hh := *h
	hh.Kind = device.KindEager
	hh.Flags &= device.FlagSync
	hh.Length = uint64(size)
	hh.Seq = d.seq.Add(1)
	if sync {
		p.mu.Lock()
		if p.err != nil {
			err := p.err
			p.mu.Unlock()
			p.credit.Add(cost)
			return err
		}
		p.syncWait[hh.Seq] = &syncEntry{h: hh, done: done}
		p.mu.Unlock()
	}
	if err := p.slots[stripeOf(hh.Source, hh.Dest, len(p.slots))].send(&hh, payload); err != nil {
		if sync {
			p.mu.Lock()
			_, mine := p.syncWait[hh.Seq]
			delete(p.syncWait, hh.Seq)
			p.mu.Unlock()
			if !mine { // the peer's failure already completed it
				return nil
			}
		}
		return err
	}
	if !sync && done != nil {
		done.Complete(nil)
	}
	return nil
}

func (d *Device) checkSource(src int32) error {
	if src < 0 || int(src) >= d.ranks || int(d.rankNode[src]) != d.self {
		return fmt.Errorf("netdev: source rank %d does not live on this node (%d)", src, d.self)
	}
	return nil
}

// SendRendezvous implements device.Device.
func (d *Device) SendRendezvous(h *device.Header, payload []byte, done device.Completer) error {
	return d.sendRendezvous(h, device.Contiguous(payload), done)
}

// SendRendezvousv implements device.Segmented: the DATA frames gather the pieces with writev, at most
// device.IovMax a call, or, when they are tiny, pack them through a staging buffer chunk by chunk.
func (d *Device) SendRendezvousv(h *device.Header, payload device.Payload, done device.Completer) error {
	return d.sendRendezvous(h, payload, done)
}

func (d *Device) sendRendezvous(h *device.Header, payload device.Payload, done device.Completer) error {
	if d.closing.Load() {
		return device.ErrClosed
	}
	if h == nil {
		return errors.New("netdev: nil header")
	}
	if uint64(payload.Size()) > d.cfg.MaxMessage {
		return fmt.Errorf("netdev: message of %d bytes over the limit %d", payload.Size(), d.cfg.MaxMessage)
	}
	if err := d.checkSource(h.Source); err != nil {
		return err
	}
	p, err := d.peerOf(h.Dest, "destination")
	if err != nil {
		return err
	}
	s := sendPool.Get()
	s.h, s.payload, s.done = *h, payload, done
	s.h.Kind = device.KindRTS
	s.h.Flags &= device.FlagSync
	s.h.Length = uint64(payload.Size())
	s.h.Seq = d.seq.Add(1)
	s.stripe = stripeOf(s.h.Source, s.h.Dest, len(p.slots))
	p.mu.Lock()
	if p.err != nil {
		err := p.err
		p.mu.Unlock()
		return err
	}
	p.rdvSend[s.h.Seq] = s
	d.inflightRdv.Add(1)
	p.mu.Unlock()
	if err := p.slots[s.stripe].send(&s.h, device.Payload{}); err != nil {
		p.mu.Lock()
		_, mine := p.rdvSend[s.h.Seq]
		delete(p.rdvSend, s.h.Seq)
		p.mu.Unlock()
		if !mine {
			return nil
		}
		d.inflightRdv.Add(-1)
		return err
	}
	return nil
}

// ClearToSend implements device.Device.
func (d *Device) ClearToSend(rts *device.Header, dst []byte, done device.Completer) error {
	return d.clearToSend(rts, device.Contiguous(dst), done)
}

// ClearToSendv implements device.Segmented: DATA is read straight into the pieces with readv where they are large,
// through the connection's read buffer and scattered where they are tiny.
func (d *Device) ClearToSendv(rts *device.Header, dst device.Payload, done device.Completer) error {
	return d.clearToSend(rts, dst, done)
}

// Segments implements device.Segmented: every peer this device serves.
func (d *Device) Segments(peer int) bool {
	_, err := d.peerOf(int32(peer), "peer")
	return err == nil
}

func (d *Device) clearToSend(rts *device.Header, dst device.Payload, done device.Completer) error {
	if d.closing.Load() {
		return device.ErrClosed
	}
	if rts == nil || rts.Kind != device.KindRTS {
		return errors.New("netdev: ClearToSend needs the RTS header delivered by the device")
	}
	if uint64(dst.Size()) > rts.Length {
		return fmt.Errorf("netdev: receive buffer of %d bytes for a message of %d", dst.Size(), rts.Length)
	}
	p, err := d.peerOf(rts.Source, "source")
	if err != nil {
		return err
	}
	// The CTS says how much the receiver takes: into a shorter buffer (a truncated receive), the sender streams
	// only the bytes that fit, and nothing is read to be thrown away.
	cts := *rts
	cts.Kind = device.KindCTS
	cts.Length = uint64(dst.Size())
	if cts.Length > 0 {
		p.mu.Lock()
		if p.err != nil {
			err := p.err
			p.mu.Unlock()
			return err
		}
		if _, dup := p.rdvRecv[rts.Seq]; dup {
			p.mu.Unlock()
			return fmt.Errorf("netdev: RTS %d from node %d cleared twice", rts.Seq, p.id)
		}
		r := recvPool.Get()
		r.h, r.dst, r.done = *rts, dst, done
		if dst.Segmented() {
			r.direct = !tiny(dst, 0, dst.Len)
		}
		p.rdvRecv[rts.Seq] = r
		d.inflightRecv.Add(1)
		p.mu.Unlock()
	}
	if err := p.slots[stripeOf(rts.Source, rts.Dest, len(p.slots))].send(&cts, device.Payload{}); err != nil {
		p.mu.Lock()
		_, mine := p.rdvRecv[rts.Seq]
		delete(p.rdvRecv, rts.Seq)
		if mine && cts.Length > 0 {
			d.inflightRecv.Add(-1)
		}
		p.mu.Unlock()
		if !mine && cts.Length > 0 {
			return nil
		}
		return err
	}
	if cts.Length == 0 && done != nil {
		done.Complete(nil)
	}
	return nil
}

// Ack implements device.Device.
func (d *Device) Ack(h *device.Header) error {
	if d.closing.Load() {
		return device.ErrClosed
	}
	if h == nil || h.Kind != device.KindEager || h.Flags&device.FlagSync == 0 {
		return errors.New("netdev: Ack needs the header of a synchronous eager message")
	}
	p, err := d.peerOf(h.Source, "source")
	if err != nil {
		return err
	}
	a := *h
	a.Kind = device.KindAck
	return p.slots[stripeOf(h.Source, h.Dest, len(p.slots))].send(&a, device.Payload{})
}

func nodeHeader(k device.Kind) device.Header {
	return device.Header{Kind: k, Source: -1, Dest: -1}
}

// EagerLimit implements device.Device: the configured eager limit while the credit toward dest's node covers a
// message of that size, else 0. Callers should send even an empty message by rendezvous when it returns 0.
func (d *Device) EagerLimit(dest int) int {
	if dest < 0 || dest >= d.ranks {
		return 0
	}
	n := int(d.rankNode[dest])
	if n == d.self {
		return d.eager
	}
	if d.peers == nil || d.peers[n] == nil {
		return 0
	}
	if d.peers[n].credit.Load() < int64(d.eager)+creditOverhead {
		return 0
	}
	return d.eager
}

// release is every Inbound's Release: it recycles the buffer and returns the credit the message held.
func (d *Device) release(in *device.Inbound) {
	in.Release = nil
	n, src := len(in.Payload), in.Header.Source
	d.inPool.put(in)
	d.returnCredit(src, n)
}

// returnCredit gives back the credit an eager message of n payload bytes from rank src held, once its payload has
// left the device's hands (released by the sink, or read into a claimed receive).
func (d *Device) returnCredit(src int32, n int) {
	if src < 0 || int(src) >= d.ranks {
		return
	}
	p := d.peers[d.rankNode[src]]
	if p == nil {
		return
	}
	cost := int64(n) + creditOverhead
	// Released before it is owed: credit the peer gets back must never be more than what left held, or a
	// frame it sends on that credit could find held still counting the message (see conn.header).
	p.held.Add(-cost)
	if p.owed.Add(cost) >= d.batch {
		p.slots[0].sendCredit()
	}
}

// overdraftOf is how far below zero a node of ranks ranks takes its send credit toward a peer (eager limit eager):
// ranks-1 messages of the largest cost, eager + creditOverhead. A rank sends eager only after EagerLimit saw at
// least one such message's worth of credit, and takes the cost after that look. Of the sends taken so far, the one
// that looked last saw at least one message's worth; every take since that look is a sender's that had looked by
// then and not yet taken, k at most if k senders can be between their look and their take at once, each taking at
// most one message's worth: the credit is at least (1-k) messages. With one sender per rank, the race of every rank
// of the node at once thus stays eager, as it did before the receiver checked; a sender beyond that (a rank's
// extra goroutine, the worker pool's nonblocking collectives) is refused by takeCredit and goes by rendezvous.
func overdraftOf(ranks, eager int) int64 {
	return int64(max(ranks-1, 0)) * (int64(eager) + creditOverhead)
}

// takeCredit takes cost bytes of send credit toward p unless that would leave it more than overdraft below zero.
// It is the only place the credit goes down, and credit returns only raise it, so the credit is never below
// -overdraft: the eager cost out toward p, sent and not yet given back, never exceeds window + overdraft, which is
// the peer's heldMax for us.
func (p *peer) takeCredit(cost, overdraft int64) bool {
	for {
		c := p.credit.Load()
		if c-cost < -overdraft {
			return false
		}
		if p.credit.CompareAndSwap(c, c-cost) {
			return true
		}
	}
}

// takeOwed claims the credit owed to the peer for one frame header.
func (p *peer) takeOwed() uint32 {
	for {
		v := p.owed.Load()
		if v <= 0 {
			return 0
		}
		x := min(v, math.MaxUint32)
		if p.owed.CompareAndSwap(v, v-x) {
			return uint32(x)
		}
	}
}

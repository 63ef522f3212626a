package rdma

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gompj/gompj/device"
)

// Defaults for the zero values of Config.
const (
	DefaultEagerLimit      = 16 << 10
	DefaultUnexpectedLimit = 64 << 20
	DefaultSplitMin        = 64 << 10
	DefaultMaxMessage      = 1 << 40
	DefaultBusyPoll        = 50 * time.Microsecond
	DefaultCloseTimeout    = 10 * time.Second
	DefaultRegCache        = 256
	DefaultRegCacheBytes   = 1 << 30
)

// Bounds of the eager grant per peer (in messages) and of the pool's reserve for control messages.
const (
	minCredits = 8
	maxCredits = 256
)

// Config describes one node's rdma device. The nodes of a job may differ in EagerLimit (each end bounds what it
// sends by what the other's buffers hold) but should agree on UnexpectedLimit.
type Config struct {
	Node   int           // this node's id, in [0, Nodes)
	Nodes  int           // how many nodes the job has
	Ranks  int           // world size
	NodeOf func(int) int // world rank -> node id

	Name            string        // how Describe names the device ("shm"; default: the provider's name)
	EagerLimit      int           // largest eager payload (default: the provider's suggestion, else 16 KiB)
	UnexpectedLimit int64         // eager bytes this node holds unreleased, over all peers (default 64 MiB)
	SplitMin        int           // a rendezvous this long is split between both ends when the provider copies by CPU and offers claim words (default 64 KiB)
	MaxMessage      uint64        // largest rendezvous message accepted (default 1 TiB)
	BusyPoll        time.Duration // the progress goroutine polls this long after the last event before it sleeps (default 50µs; <0: no busy polling)
	CloseTimeout    time.Duration // how long Close waits for traffic in flight (default 10 s)
	RegCache        int           // registrations the pin-down cache keeps (default 256)
	// RegCacheBytes bounds the bytes the pin-down cache keeps registered (default 1 GiB): past it, the least
	// recently used idle registrations go. Registrations in use by a transfer are never evicted.
	RegCacheBytes int64
}

func (c *Config) fill(caps Caps) error {
	if c.EagerLimit == 0 {
		c.EagerLimit = caps.EagerLimit
		if c.EagerLimit == 0 {
			c.EagerLimit = DefaultEagerLimit
		}
	}
	if c.UnexpectedLimit == 0 {
		c.UnexpectedLimit = DefaultUnexpectedLimit
	}
	if c.SplitMin == 0 {
		c.SplitMin = DefaultSplitMin
	}
	if c.MaxMessage == 0 {
		c.MaxMessage = DefaultMaxMessage
	}
	if c.BusyPoll == 0 {
		c.BusyPoll = DefaultBusyPoll
	}
	if c.CloseTimeout == 0 {
		c.CloseTimeout = DefaultCloseTimeout
	}
	if c.RegCache == 0 {
		c.RegCache = DefaultRegCache
	}
	if c.RegCacheBytes == 0 {
		c.RegCacheBytes = DefaultRegCacheBytes
	}
	switch {
	case c.Nodes <= 0 || c.Node < 0 || c.Node >= c.Nodes:
		return fmt.Errorf("rdma: node %d of %d", c.Node, c.Nodes)
	case c.Ranks <= 0 || c.Ranks > math.MaxInt32:
		return fmt.Errorf("rdma: world size %d", c.Ranks)
	case c.NodeOf == nil:
		return errors.New("rdma: no rank layout (NodeOf)")
	case c.EagerLimit < 0 || c.EagerLimit > 1<<30:
		return fmt.Errorf("rdma: eager limit %d", c.EagerLimit)
	case c.UnexpectedLimit < 0:
		return fmt.Errorf("rdma: unexpected limit %d", c.UnexpectedLimit)
	case c.RegCache < 0 || c.RegCacheBytes < 0:
		return fmt.Errorf("rdma: registration cache bounds %d entries, %d bytes", c.RegCache, c.RegCacheBytes)
	case caps.MaxMsg < extHdrSize+64:
		return fmt.Errorf("rdma: the provider's largest message (%d bytes) is too small", caps.MaxMsg)
	}
	// A receive buffer holds a header and an eager payload, or a DATA chunk of the same size.
	c.EagerLimit = min(c.EagerLimit, caps.MaxMsg-extHdrSize)
	return nil
}

// Device is a node's rdma device over one provider endpoint. It implements device.Transport, device.Poller,
// device.Registrar, device.Segmented and device.Describer.
type Device struct {
	cfg      Config
	ep       Endpoint
	splitter Claimer // splits large rendezvous between both ends (Caps.SplitCopy with claim words), or nil
	caps     Caps
	self     int
	ranks    int
	rankNode []int32
	sink     device.Sink
	claimer  device.EagerClaimer // the sink, if it matches eager messages at their header (process)
	claimHdr device.Header       // the header process offers claimer (pollMu)
	rts      device.Header       // the RTS process delivers to the sink (pollMu)
	// tookInPlace: takeInPlace took a message during the endpoint's Poll under way (pollMu)
	tookInPlace bool
	peers       []*peer // nil for this node and for nodes the device does not serve
	active      []*peer // the served peers
	bufSize     int     // receive buffer size: header and payload
	credits     int32   // eager credits granted to each peer
	batch       int32   // owed credits that make a credit message

	started  bool
	seq      atomic.Uint64
	closing  atomic.Bool
	inflight atomic.Int64 // rendezvous and synchronous sends under way
	pending  atomic.Int32 // peers with a backlog
	opID     atomic.Uint64
	ops      opTable // rma op id -> *rdvSend or *rdvRecv

	localMu sync.Mutex
	local   []Completion // completions the device makes itself (a failed Read issued outside the poller)
	hasLoc  atomic.Bool

	vec     VectorRMA // the endpoint's vectored Read and Write, if it has them and needs no local registrations
	rx      *rxPool
	tx      *txPool
	cache   *regCache
	release func(*device.Inbound)

	// Driving (device.Poller).
	drivers atomic.Int32
	blocked atomic.Bool // the progress goroutine is in the endpoint's Wait, or about to be: Enter wakes it
	kick    chan struct{}
	quit    chan struct{}
	done    chan struct{}

	pollMu     sync.Mutex       // held by whoever polls (the progress goroutine or a driving rank)
	loopHolds  atomic.Bool      // the progress goroutine holds pollMu (Poll yields to it)
	polls      uint64           // Polls by driving ranks, under pollMu (Poll yields now and then)
	lastYield  time.Time        // when a Poll last yielded, under pollMu
	idle       device.IdleYield // driving Polls in a row that found nothing (idleYieldEvery)
	cq         []Completion
	lastActive time.Time
	busyPoll   atomic.Int64                  // Config.BusyPoll, or what SetBusyPoll made it (<= 0: none)
	helper     atomic.Pointer[device.Helper] // SetHelper's: what the progress goroutine runs between rounds

	closeOnce sync.Once
	closeErr  error
}

// peer is the state of one served node.
type peer struct {
	id  int
	d   *Device
	lim limits

	credit atomic.Int32 // eager credits left toward the peer
	owed   atomic.Int32 // eager credits to return to it
	grant  int32        // the credits it grants us
	rma    atomic.Bool  // Write and Read work toward it (known once connected)
	lent   atomic.Bool  // Write and Read of lent memory work toward it, whether or not rma does (LentRMA)
	// Sizes of the peer's receive buffers (from its address): what it accepts.
	eagerMax int
	chunk    int

	mu       sync.Mutex // the send path (backlog, pseqOut) and the tables
	err      error      // set once: the peer is lost or closed
	pseqOut  uint32
	backlog  []*out
	queued   bool // counted in Device.pending
	hbuf     [extHdrSize]byte
	syncWait map[uint64]*syncEntry
	rdvSend  map[uint64]*rdvSend
	rdvRecv  map[uint64]*rdvRecv
	rtsIn    map[uint64]hdr // RTS delivered to the sink, not yet cleared (by value: no allocation per RTS)

	// Owned by the poller.
	pseqIn   uint32
	held     map[uint32]heldMsg // messages that arrived before their turn (unordered providers)
	failed   bool
	reported bool
}

type syncEntry struct {
	h    device.Header
	done device.Completer
}

// New makes the device over an endpoint opened by its provider. The endpoint's address, with the device's own
// parameters, is the device's Address.
func New(ep Endpoint, cfg Config) (*Device, error) {
	caps := ep.Caps()
	if err := cfg.fill(caps); err != nil {
		ep.Close()
		return nil, err
	}
	d := &Device{cfg: cfg, ep: ep, caps: caps, self: cfg.Node, ranks: cfg.Ranks, rankNode: make([]int32, cfg.Ranks),
		kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}), cq: make([]Completion, 64)}
	d.busyPoll.Store(int64(cfg.BusyPoll))
	for r := range cfg.Ranks {
		n := cfg.NodeOf(r)
		if n < 0 || n >= cfg.Nodes {
			ep.Close()
			return nil, fmt.Errorf("rdma: layout puts rank %d on node %d, outside [0,%d)", r, n, cfg.Nodes)
		}
		d.rankNode[r] = int32(n)
	}
	d.bufSize = extHdrSize + cfg.EagerLimit
	// The grant depends only on the configuration and the job's shape, not on which peers this device serves, and
	// is published in the address, so that both ends of a pair agree on it.
	others := max(cfg.Nodes-1, 1)
	d.credits = int32(min(max(cfg.UnexpectedLimit/int64(others*d.bufSize), minCredits), maxCredits))
	if caps.RecvDepth > 0 {
		d.credits = int32(max(min(int(d.credits), (caps.RecvDepth-reserveFor(others))/others), 1))
	}
	d.batch = max(d.credits/4, 1)
	d.release = d.releaseInbound
	d.cache = newRegCache(ep, cfg.RegCache, cfg.RegCacheBytes)
	if rv, ok := ep.(VectorRMA); ok && !caps.LocalMR {
		d.vec = rv
	}
	if cl, ok := ep.(Claimer); ok && caps.SplitCopy {
		d.splitter = cl
	}
	return d, nil
}

// addrVersion is the first byte of the device's address blob: [version][eager limit u32][credits u32][provider
// address]: what this node's receive buffers hold and how many of them it grants each peer.
const (
	addrVersion = 1
	addrHead    = 9
)

// reserveFor is the number of posted buffers beyond the grants, for control messages from peers peers.
func reserveFor(peers int) int { return 16 + 4*peers }

// Address implements device.Transport.
func (d *Device) Address() []byte {
	pa := d.ep.Address()
	b := make([]byte, addrHead, addrHead+len(pa))
	b[0] = addrVersion
	binary.LittleEndian.PutUint32(b[1:], uint32(d.cfg.EagerLimit))
	binary.LittleEndian.PutUint32(b[5:], uint32(d.credits))
	return append(b, pa...)
}

// parseAddress decodes a peer's address blob (see Address), which comes through the job's bootstrap from another
// process: its eager limit, the credits it grants, and the provider's address (for the endpoint's Connect, which
// checks it). It never panics.
func parseAddress(a []byte) (eager int, grant int64, provider []byte, err error) {
	if len(a) <= addrHead || a[0] != addrVersion {
		return 0, 0, nil, errors.New("not an rdma address")
	}
	eager = int(binary.LittleEndian.Uint32(a[1:]))
	grant = int64(binary.LittleEndian.Uint32(a[5:]))
	if eager <= 0 || eager > 1<<30 || grant <= 0 || grant > maxCredits {
		return 0, 0, nil, fmt.Errorf("an eager limit of %d and %d credits", eager, grant)
	}
	return eager, grant, a[addrHead:], nil
}

// Alloc implements device.Lender with the endpoint's Lender, if it is one.
func (d *Device) Alloc(n int) ([]byte, error) {
	if l, ok := d.ep.(Lender); ok {
		return l.Alloc(n)
	}
	return nil, device.ErrNoLending
}

// Free implements device.Lender.
func (d *Device) Free(b []byte) (bool, error) {
	if l, ok := d.ep.(Lender); ok {
		return l.Free(b)
	}
	return false, nil
}

// Describe implements device.Describer.
func (d *Device) Describe() string {
	if s, ok := d.ep.(interface{ Describe() string }); ok {
		return s.Describe()
	}
	if d.cfg.Name != "" {
		return d.cfg.Name
	}
	return "rdma"
}

// Start implements device.Transport.
func (d *Device) Start(sink device.Sink, addrs [][]byte) error {
	if d.started {
		return errors.New("rdma: started twice")
	}
	if sink == nil {
		return errors.New("rdma: no Sink")
	}
	if len(addrs) != d.cfg.Nodes {
		return fmt.Errorf("rdma: %d addresses for %d nodes", len(addrs), d.cfg.Nodes)
	}
	d.sink = sink
	d.claimer, _ = sink.(device.EagerClaimer)
	if ip, ok := d.ep.(InPlacer); ok && d.claimer != nil && d.caps.Ordered {
		ip.OfferInPlace(d.takeInPlace)
	}
	d.peers = make([]*peer, d.cfg.Nodes)
	for n, a := range addrs {
		if n == d.self || a == nil {
			continue
		}
		eager, grant, pa, err := parseAddress(a)
		if err != nil {
			return fmt.Errorf("rdma: node %d's address: %w", n, err)
		}
		if err := d.ep.Connect(n, pa); err != nil {
			return fmt.Errorf("rdma: connecting to node %d: %w", n, err)
		}
		p := &peer{id: n, d: d, eagerMax: min(eager, d.cfg.EagerLimit), chunk: eager, grant: int32(grant),
			syncWait: map[uint64]*syncEntry{}, rdvSend: map[uint64]*rdvSend{}, rdvRecv: map[uint64]*rdvRecv{},
			rtsIn: map[uint64]hdr{}, held: map[uint32]heldMsg{}}
		p.lim = limits{ranks: d.ranks, rankNode: d.rankNode, self: d.self, peer: n, maxEager: uint64(d.cfg.EagerLimit),
			maxData: uint64(d.cfg.EagerLimit), maxMessage: d.cfg.MaxMessage}
		d.peers[n] = p
		d.active = append(d.active, p)
	}
	np := max(len(d.active), 1)
	n := int(d.credits)*np + reserveFor(np)
	if d.caps.RecvDepth > 0 {
		n = min(n, d.caps.RecvDepth)
	}
	for _, p := range d.active {
		p.credit.Store(p.grant)
	}
	var err error
	if d.rx, err = newRxPool(d, n); err != nil {
		return err
	}
	if d.tx, err = newTxPool(d, 64); err != nil {
		return err
	}
	d.started = true
	go d.loop()
	return nil
}

// WaitConnected implements device.Transport: the endpoint reaches every served peer.
func (d *Device) WaitConnected(timeout time.Duration) error {
	if err := d.ep.Ready(timeout); err != nil {
		return err
	}
	for _, p := range d.active {
		p.rma.Store(d.caps.RMA && d.ep.PeerRMA(p.id))
		if l, ok := d.ep.(LentRMA); ok {
			p.lent.Store(l.LentRMA(p.id))
		}
	}
	return nil
}

// peerOf returns the served peer hosting rank.
func (d *Device) peerOf(rank int32, what string) (*peer, error) {
	if rank < 0 || int(rank) >= d.ranks {
		return nil, fmt.Errorf("rdma: %s rank %d outside [0,%d)", what, rank, d.ranks)
	}
	n := int(d.rankNode[rank])
	if n == d.self {
		return nil, fmt.Errorf("rdma: %s rank %d lives on this node (%d); local traffic does not use the device", what, rank, d.self)
	}
	if d.peers == nil || d.peers[n] == nil {
		return nil, fmt.Errorf("rdma: %s rank %d lives on node %d, which this device does not serve", what, rank, n)
	}
	return d.peers[n], nil
}

func (d *Device) checkSource(src int32) error {
	if src < 0 || int(src) >= d.ranks || int(d.rankNode[src]) != d.self {
		return fmt.Errorf("rdma: source rank %d does not live on this node (%d)", src, d.self)
	}
	return nil
}

// PeerError names the node an error is about.
type PeerError struct {
	Node int
	Kind error // ErrPeerLost or ErrPeerClosed
	Err  error
}

// ErrPeerLost is wrapped by errors about a node that is gone.
var ErrPeerLost = errors.New("rdma: peer lost")

// ErrPeerClosed is wrapped by errors about a node that closed its device.
var ErrPeerClosed = errors.New("rdma: peer closed")

func (e *PeerError) Error() string {
	what := "lost"
	if e.Kind == ErrPeerClosed {
		what = "closed"
	}
	return fmt.Sprintf("rdma: %s node %d: %v", what, e.Node, e.Err)
}

func (e *PeerError) Unwrap() []error { return []error{e.Kind, e.Err} }

// Close implements device.Device: it stops new sends, lets the progress goroutine finish what is in flight (up to
// CloseTimeout), then closes the endpoint, which says goodbye to the peers.
func (d *Device) Close() error {
	d.closeOnce.Do(func() {
		d.closing.Store(true)
		if !d.started {
			d.closeErr = d.ep.Close()
			return
		}
		close(d.quit)
		d.ep.Wake()
		<-d.done
		// The loop is gone: nothing polls any more. Fail what is left, then let the endpoint go.
		d.pollMu.Lock()
		for _, p := range d.active {
			d.failPeer(p, &PeerError{Node: p.id, Kind: ErrPeerClosed, Err: device.ErrClosed}, false)
		}
		d.pollMu.Unlock()
		if err := d.ep.Close(); err != nil && d.closeErr == nil {
			d.closeErr = err
		}
		d.cache.close()
		d.rx.close()
		d.tx.close()
		runtime.KeepAlive(d)
	})
	return d.closeErr
}

// opTable maps the ids of rendezvous transfers with Reads or Writes in flight to their records (*rdvSend or
// *rdvRecv). A map under a mutex rather than a sync.Map, whose Store allocated an entry for every new id: one per
// rendezvous (a persistent collective's Start and Wait are to allocate nothing at steady state).
type opTable struct {
	mu sync.Mutex
	m  map[uint64]any
}

func (t *opTable) Store(id uint64, v any) {
	t.mu.Lock()
	if t.m == nil {
		t.m = map[uint64]any{}
	}
	t.m[id] = v
	t.mu.Unlock()
}

func (t *opTable) Load(id uint64) (any, bool) {
	t.mu.Lock()
	v, ok := t.m[id]
	t.mu.Unlock()
	return v, ok
}

func (t *opTable) Delete(id uint64) {
	t.mu.Lock()
	delete(t.m, id)
	t.mu.Unlock()
}

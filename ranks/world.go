package ranks

import (
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/queues"
)

// Options configure a World.
type Options struct {
	Size       int           // ranks in the job
	Lo, Hi     int           // world ranks hosted by this node: [Lo, Hi)
	EagerLimit int           // intra-node protocol switch in bytes: larger messages go rendezvous
	Policy     queues.Policy // how ranks wait
	NetSpin    time.Duration // how long a wait that may complete through the device spins (0: Policy.Spin)
	Device     device.Device // the node's network device; nil for a one-node job
	NodeOf     func(rank int) int
	Routes     string // which device serves which peer nodes, as node describes it (informational)
	// Devices names the devices that serve peer nodes, the host's shared memory ("shm") first; nil in a one-node
	// job.
	Devices []string
	// UnexpectedLimit is the unexpected eager data, in bytes, that the node's ranks may hold from each other,
	// divided among them: see UnexpectedShare.
	UnexpectedLimit int64
	// UnexpectedShare, if positive, is each rank's share exactly, below MinUnexpectedShare too (tests use a few
	// KiB, so that every stream crosses the bound).
	UnexpectedShare int64
	Executor        Executor // the node's worker pool; nil: nothing runs in the background
	NbcSlots        int      // shared-memory slots per communicator of nonblocking collectives (0: their default)
	// Overlap has nonblocking collectives that cross node processes started by the Executor, so that their starting
	// calls return at once (node.Config.Overlap, GOMPJ_OVERLAP).
	Overlap bool
	// CallCheck has communicators that span nodes log their collective calls for the node's CheckCalls (callcheck.go).
	CallCheck bool
}

// Executor runs tasks in the background: the node's worker pool, on which nonblocking collectives progress. Submit
// never blocks and never fails; tasks must not block either.
type Executor interface {
	Submit(task func())
}

// World is one node process's share of a job.
type World struct {
	size   int
	lo, hi int
	ranks  []*Rank
	// returned: by local rank (id-lo), whether it returned from the job's function (Returned); anyReturned, whether
	// any did. Written once per rank, read by waits that look for a deadlock (package collectives).
	returned    []atomic.Bool
	anyReturned atomic.Bool
	dev         device.Device
	segs        device.Segmented // dev, when it moves segmented payloads (views) itself
	devOf       []device.Device  // by world rank, the device dev routes that rank's messages to (nil: none, or ask dev)
	nodeOf      func(int) int
	eager       int
	policy      queues.Policy
	// netPolicy is policy with the device as driver (when it is a device.Poller): waits that may complete through
	// the network poll the device themselves.
	netPolicy queues.Policy
	// net is the device as a device.Poller, or nil: the test calls (Test, Testany, Iprobe...) poll it once each
	// (pollNet).
	net device.Poller

	abortCh   chan struct{}
	abortOnce sync.Once
	aborted   atomic.Bool
	abortErr  error

	hooks    Hooks
	routes   string
	devices  []string
	exec     Executor
	nbcSlots int
	overlap  bool
	chk      callCheck // the call check (callcheck.go)

	orphans orphans // operation requests freed while active (see sweepOrphans)

	// soon resumes the network's progress loop a grace after a small operation starts (ResumeNetworkSoon); nil
	// without a device.Poller. soonArmed: it is set to fire.
	soon      *time.Timer
	soonArmed atomic.Bool

	sharedMu sync.Mutex
	shared   map[sharedKey]any
	// released counts, per communicator (key ""), how many of its members here have freed it, and per shared
	// object, how many have unshared it (lastRelease)
	released map[sharedKey]int
}

// sharedKey names a communicator on this node: disjoint groups from one Split share a context, but never their
// first member.
type sharedKey struct {
	ctx    uint32
	leader int
	key    string
}

// Rank is the state of one rank: its queues and its communicator bookkeeping. Its lines are laid out by who
// touches them: senders on other cores read the first (read-mostly) line on every message and take the second
// (the lock and the queues) only when the slot does not serve them. Its size is a multiple of 64 bytes, so the
// allocator aligns ranks to lines (TestRankLayout).
type Rank struct {
	// slot points to the rank's slotted receive: its earliest posted receive when it is the only one, which a
	// sender claims with one CAS on the request's own line (Request.claim), without the lock. A receive is
	// slotted only under mu, only when posted is empty and after unexp was searched, and every sender looks at
	// the slot before posted, so MPI's matching order holds. The pointer stays after a claim: a blocking
	// receive's request is the same one call after call, so the slot's line is written only when a different
	// request is slotted, and the sender's copy of it stays valid.
	slot atomic.Pointer[request]
	w    *World
	id   int
	_    [40]byte

	mu     spinLock // guards posted, unexp, the bound's account, probers and msgs together, as smdev does
	posted queues.Posted
	unexp  queues.Unexpected
	// held and share bound the memory of this rank's unexpected queue (see reserve): held is what the eager
	// messages queued here by ranks of this node hold, share the most they may. They sit on unexp's line, which a
	// sender queuing a message and the receiver taking it write anyway.
	held    int64
	share   int64
	probers []*queues.Waker
	msgs    []*msg   // recycled messages for senders to this rank (see takeMsg)
	_       [16]byte // the owner's cold fields start a line of their own

	spare  atomic.Pointer[request]       // a request for the blocking calls of one goroutine, without the lock
	hdr    atomic.Pointer[device.Header] // a header for sends to other nodes (see header)
	freeMu sync.Mutex
	free   []*request               // the rank's own recycled requests beyond the spare (see getReq)
	chunk  atomic.Pointer[reqChunk] // where the rank's nonblocking calls get their requests (see newReq)
	misses atomic.Uint32            // the rank's test calls that found nothing (see missed)
	// handles: where the rank's nonblocking calls get their handles (see newHandle)
	handles atomic.Pointer[handleChunk]
	// completing: the completion calls in progress on the rank's requests (see Request.enter)
	completing atomic.Int32

	ctxMu     sync.Mutex // guards nextCtx, ctxHolder and agreeing (agree.go)
	nextCtx   uint32
	world     *Comm
	ctxHolder *agreement                 // the context agreement holding this rank's right to allocate, if any
	agreeing  []*agreement               // the context agreements in flight on this rank
	bsend     atomic.Pointer[bsendState] // the buffer attached for buffered sends (bsend.go), made on first use
	ops       *rankOps                   // the rank's active operation requests (ops.go)
	coop      *coop                      // a large copy into or out of this rank's buffers, shared (coop.go)
	_         [36]byte                   // to a whole number of lines (TestRankLayout)
}

// MinUnexpectedShare is the least unexpected eager data a rank may hold from its own node, whatever
// Options.UnexpectedLimit and the number of local ranks (see Rank.reserve).
const MinUnexpectedShare = 256 << 10

// UnexpectedShare is how much unexpected eager data each of a node's localRanks ranks may hold from the ranks of
// its own node: the node's limit divided among them, and never less than MinUnexpectedShare.
func UnexpectedShare(limit int64, localRanks int) int64 {
	return max(limit/int64(max(localRanks, 1)), MinUnexpectedShare)
}

// NewWorld builds the local ranks of a job.
func NewWorld(o Options) (*World, error) {
	if o.Size <= 0 || o.Lo < 0 || o.Hi > o.Size || o.Lo >= o.Hi {
		return nil, fmt.Errorf("%w: world of %d ranks hosting [%d, %d)", ErrArg, o.Size, o.Lo, o.Hi)
	}
	if o.Device == nil && (o.Lo != 0 || o.Hi != o.Size) {
		return nil, fmt.Errorf("%w: ranks outside this node but no network device", ErrArg)
	}
	w := &World{size: o.Size, lo: o.Lo, hi: o.Hi, dev: o.Device, nodeOf: o.NodeOf, eager: o.EagerLimit,
		policy: o.Policy, abortCh: make(chan struct{}), exec: o.Executor,
		nbcSlots: o.NbcSlots, overlap: o.Overlap, routes: o.Routes, devices: slices.Clone(o.Devices)}
	w.netPolicy = w.policy
	w.chk.on = o.CallCheck && o.Device != nil
	w.segs, _ = o.Device.(device.Segmented)
	if r, ok := o.Device.(deviceRouter); ok {
		// Each send to another node goes to the device serving it straight away, not through the router's lookup at
		// every call (twice per eager message: EagerLimit, SendEager).
		w.devOf = make([]device.Device, o.Size)
		for k := range w.devOf {
			if k < o.Lo || k >= o.Hi {
				w.devOf[k] = r.DeviceFor(k)
			}
		}
	}
	if p, ok := o.Device.(device.Poller); ok {
		w.netPolicy = w.policy.Driven(p)
		w.net = p
		w.soon = time.AfterFunc(time.Hour, w.resumeDue)
		w.soon.Stop()
	}
	if o.NetSpin > 0 {
		w.netPolicy.Spin = o.NetSpin
	}
	if w.nodeOf == nil {
		w.nodeOf = func(int) int { return 0 }
	}
	w.ranks = make([]*Rank, o.Hi-o.Lo)
	w.returned = make([]atomic.Bool, o.Hi-o.Lo)
	share := o.UnexpectedShare
	if share <= 0 {
		share = UnexpectedShare(o.UnexpectedLimit, len(w.ranks))
	}
	for i := range w.ranks {
		r := &Rank{w: w, id: o.Lo + i, nextCtx: 1, share: share, ops: newRankOps(), coop: newCoop()}
		r.world = &Comm{r: r, w: w, rank: r.id, size: o.Size, ctx: 0}
		w.ranks[i] = r
	}
	return w, nil
}

// waitPolicy is how a rank waits for something that may (remote) or may not come through the network device.
func (w *World) waitPolicy(remote bool) *queues.Policy {
	if remote {
		return &w.netPolicy
	}
	return &w.policy
}

// Size is the number of ranks in the job.
func (w *World) Size() int { return w.size }

// Local returns the range of world ranks hosted here.
func (w *World) Local() (lo, hi int) { return w.lo, w.hi }

// Comm returns the world communicator of local rank id.
func (w *World) Comm(id int) *Comm { return w.ranks[id-w.lo].world }

// NodeOf returns the node hosting a world rank.
func (w *World) NodeOf(rank int) int { return w.nodeOf(rank) }

// Device returns the node's network device (nil in a one-node job).
func (w *World) Device() device.Device { return w.dev }

// Routes says which device serves which peer nodes ("" in a one-node job).
func (w *World) Routes() string { return w.routes }

// Devices names the devices that serve peer nodes, the host's shared memory first (nil in a one-node job).
func (w *World) Devices() []string { return slices.Clone(w.devices) }

// Executor returns the node's worker pool, or nil when there is none (GOMPJ_ASYNC_PROGRESS=0).
func (w *World) Executor() Executor { return w.exec }

// NbcSlots returns the shared-memory slots per communicator that nonblocking collectives use (0: their default).
func (w *World) NbcSlots() int { return w.nbcSlots }

// Overlap reports whether nonblocking collectives that cross node processes are started by the Executor
// (Options.Overlap).
func (w *World) Overlap() bool { return w.overlap }

// Policy returns how ranks wait.
func (w *World) Policy() *queues.Policy { return &w.policy }

// AbortCh is closed when the job aborts.
func (w *World) AbortCh() <-chan struct{} { return w.abortCh }

// Aborted reports whether the job has aborted.
func (w *World) Aborted() bool { return w.aborted.Load() }

// Abort ends the job: every blocked call on every local rank returns ErrAborted wrapping cause. The first cause
// wins; it is what AbortCause returns.
func (w *World) Abort(cause error) {
	w.abortOnce.Do(func() {
		w.abortErr = cause
		w.aborted.Store(true)
		close(w.abortCh)
	})
}

// AbortCause returns what aborted the job, or nil.
func (w *World) AbortCause() error {
	if !w.aborted.Load() {
		return nil
	}
	return w.abortErr
}

func (w *World) abortError() error {
	return fmt.Errorf("%w: %v", ErrAborted, w.AbortCause())
}

// Returned records that rank id of this node process returned from the job's function: it makes no more calls.
// The objects shared on this node (Shared) that implement ReturnWatcher are told.
func (w *World) Returned(id int) {
	if id < w.lo || id >= w.hi {
		return
	}
	w.returned[id-w.lo].Store(true)
	w.anyReturned.Store(true)
	var watchers []ReturnWatcher
	w.sharedMu.Lock()
	for _, v := range w.shared {
		if rw, ok := v.(ReturnWatcher); ok {
			watchers = append(watchers, rw)
		}
	}
	w.sharedMu.Unlock()
	for _, rw := range watchers {
		rw.RankReturned()
	}
}

// ReturnWatcher is a shared object (World.Shared) told when a rank of the node process returns from the job's
// function: package collectives wakes the waits parked in its shared memory, to look again for a deadlock.
type ReturnWatcher interface{ RankReturned() }

// MembersReturned returns how many members of c on this node process returned from the job's function (Returned).
// Package collectives counts them with the members that wait in shared memory: once every member has either
// returned or parked, none will move the others on.
func (c *Comm) MembersReturned() int {
	w := c.w
	if !w.anyReturned.Load() {
		return 0
	}
	k := 0
	for i := range c.size {
		if r := c.peerWorld(i); r >= w.lo && r < w.hi && w.returned[r-w.lo].Load() {
			k++
		}
	}
	return k
}

func (w *World) local(worldRank int) *Rank {
	if worldRank >= w.lo && worldRank < w.hi {
		return w.ranks[worldRank-w.lo]
	}
	return nil
}

// Shared returns the object the members of c on this node share under key, making it with mk the first time.
// Collectives keep their shared-memory state here.
func (w *World) Shared(c *Comm, key string, mk func() any) any {
	w.sharedMu.Lock()
	defer w.sharedMu.Unlock()
	if w.shared == nil {
		w.shared = make(map[sharedKey]any)
	}
	k := sharedKey{c.ctx &^ 1, c.WorldRank(0), key}
	v, ok := w.shared[k]
	if !ok {
		v = mk()
		w.shared[k] = v
	}
	return v
}

// Unshare forgets the object that Shared made for c under key, once every member of c on this node has unshared
// it; until then a member that has not looked it up yet still finds it. Package nbc unshares a persistent
// collective's own slot when its requests are freed: each one made on a communicator that lives on, the world's
// included, kept its slot to the end of the job.
func (w *World) Unshare(c *Comm, key string) {
	here := w.localMembers(c)
	w.sharedMu.Lock()
	defer w.sharedMu.Unlock()
	if k := (sharedKey{c.ctx &^ 1, c.WorldRank(0), key}); w.lastRelease(k, here) {
		delete(w.shared, k)
	}
}

// lastRelease counts one more release of k by a member here and reports whether it was the last of here's, then
// forgetting the count. Called with sharedMu held.
func (w *World) lastRelease(k sharedKey, here int) bool {
	if w.released == nil {
		w.released = make(map[sharedKey]int)
	}
	if w.released[k]++; w.released[k] < here {
		return false
	}
	delete(w.released, k)
	return true
}

// localMembers counts the members of c that live on this node.
func (w *World) localMembers(c *Comm) int {
	here := 0
	for i := 0; i < c.size; i++ {
		if w.local(c.WorldRank(i)) != nil {
			here++
		}
	}
	return here
}

// dropShared forgets a freed communicator's shared objects, and no other group's, once every member of the
// communicator on this node has freed it. Members make their first calls at their own pace (a neighbourhood
// collective waits for neighbours only, so a member may finish with the communicator before another has started),
// and a member that looked an object up after an early drop would make a fresh one that the others never see.
func (w *World) dropShared(c *Comm) {
	ctx, leader := c.ctx&^1, c.WorldRank(0)
	here := w.localMembers(c)
	w.sharedMu.Lock()
	defer w.sharedMu.Unlock()
	if !w.lastRelease(sharedKey{ctx: ctx, leader: leader}, here) {
		return
	}
	for k := range w.shared {
		if k.ctx == ctx && k.leader == leader {
			delete(w.shared, k)
		}
	}
	for k := range w.released { // objects that not every member unshared
		if k.ctx == ctx && k.leader == leader {
			delete(w.released, k)
		}
	}
}

// msg is an unexpected message: it arrived before its receive was posted.
type msg struct {
	item  queues.Item // must stay the first field
	typ   Type
	count int
	proto proto
	data  []byte    // eagerOwned: our copy (small, pooled or encoded); rendezvousLocal: the sender's memory
	sview *viewData // rendezvousLocal from a View: the sender's view (data is nil), its window from element soff
	soff  int
	class int     // size class of a pooled data buffer, -1 if none
	box   *[]byte // the pooled buffer's holder, put back with it (so that recycling allocates nothing)
	// inPlace: a small eager message whose payload is in small (see own); its receiver recycles it itself.
	inPlace bool
	// held is what the message counts against its receiver's share (see Rank.reserve); 0 if it is not counted.
	held  int64
	sreq  *request
	from  *Rank // rendezvousLocal: the sending rank, whose wait may help with the copy (coop.go)
	in    *device.Inbound
	rts   device.Header
	small [smallMsg]byte // the payload of a small eager message, in place
}

// smallMsg is the largest payload an unexpected message carries in place rather than in a pooled buffer.
const smallMsg = 64

type proto uint8

const (
	eagerOwned       proto = iota + 1 // data is ours (a pooled copy, or encoded object bytes)
	rendezvousLocal                   // data is the local sender's memory; sreq completes after the copy
	eagerRemote                       // in holds the payload; Ack the sender if FlagSync
	rendezvousRemote                  // rts describes the message; ClearToSend when matched
)

const numClasses = 18 // 64 B .. 8 MiB

var (
	msgPool  = sync.Pool{New: func() any { return &msg{class: -1} }}
	bufPools [numClasses]sync.Pool
)

func sizeClass(n int) int {
	if n <= 64 {
		return 0
	}
	c := bits.Len(uint(n-1)) - 6
	if c >= numClasses {
		return -1
	}
	return c
}

// own gives m a buffer of n bytes of its own as data: in place if small, else pooled by size class.
func (m *msg) own(n int) []byte {
	if n <= smallMsg {
		m.data, m.class, m.inPlace = m.small[:n:n], -1, true
		return m.data
	}
	c := sizeClass(n)
	if c < 0 {
		m.data, m.class = make([]byte, n), -1
		return m.data
	}
	box, _ := bufPools[c].Get().(*[]byte)
	if box == nil {
		b := make([]byte, 64<<c)
		box = &b
	}
	m.data, m.class, m.box = (*box)[:n], c, box
	return m.data
}

// disown puts back m's pooled buffer, if it has one.
func (m *msg) disown() {
	if m.box != nil {
		bufPools[m.class].Put(m.box)
	}
}

func getMsg() *msg { return msgPool.Get().(*msg) }

// bounce returns a buffer of n bytes from the size-class pools and its holder, to give back with unbounce (a nil
// holder: too large to pool). Views that a device cannot move in pieces are packed into, or received through, one.
func bounce(n int) ([]byte, *[]byte) {
	c := sizeClass(n)
	if c < 0 {
		return make([]byte, n), nil
	}
	box, _ := bufPools[c].Get().(*[]byte)
	if box == nil {
		b := make([]byte, 64<<c)
		box = &b
	}
	return (*box)[:n], box
}

func unbounce(box *[]byte) {
	if box != nil {
		bufPools[sizeClass(cap(*box))].Put(box)
	}
}

// Scratch is bounce for the layers above: a buffer of n bytes, with any contents, from the pools that carry
// unexpected messages and packed views, and its holder for PutScratch (nil: too large to pool, made afresh).
// Nonblocking collectives take their schedules' scratch buffers from it.
func Scratch(n int) ([]byte, *[]byte) { return bounce(n) }

// PutScratch gives back a holder from Scratch (nil is ignored); nothing may use its buffer afterwards.
func PutScratch(box *[]byte) { unbounce(box) }

// maxKeptMsgs bounds a rank's list of recycled messages.
const maxKeptMsgs = 64

// takeMsg returns a message for a sender to queue at r: one that r recycled, else a pooled one. Called with r.mu
// held. Small messages thus circulate between a rank's senders and the rank, without the pool's per-processor
// caches, which a stream from one core to another would drain on one side and fill on the other.
func (r *Rank) takeMsg() *msg {
	if n := len(r.msgs); n > 0 {
		m := r.msgs[n-1]
		r.msgs = r.msgs[:n-1]
		return m
	}
	return getMsg()
}

// keepMsg recycles a consumed message into r's list. Called with r.mu held.
func (r *Rank) keepMsg(m *msg) {
	*m = msg{class: -1}
	if len(r.msgs) < maxKeptMsgs {
		r.msgs = append(r.msgs, m)
		return
	}
	msgPool.Put(m)
}

// recycle releases a message that rank r received. A local one goes back to r's list, where r's next sender takes
// it (takeMsg): through the pool it would allocate at steady state, since a Put on the receiver's processor fills
// that processor's private slot, which the sender's Get on another processor cannot reach.
func (r *Rank) recycle(m *msg) {
	if m.proto == eagerRemote {
		m.release()
		return
	}
	if m.proto == eagerOwned {
		m.disown()
	}
	r.mu.Lock()
	r.keepMsg(m)
	r.mu.Unlock()
}

// src is the message's elements in memory: its payload, or the local sender's View.
func (m *msg) src() Mem {
	if m.sview != nil {
		return Mem{Type: m.typ, N: m.count, view: m.sview, off: m.soff}
	}
	return bytesMem(m.typ, m.count, m.payload())
}

func (m *msg) payload() []byte {
	if m.proto == eagerRemote {
		return m.in.Payload
	}
	return m.data
}

// release returns whatever the message owns.
func (m *msg) release() {
	switch m.proto {
	case eagerOwned:
		m.disown()
	case eagerRemote:
		m.in.Done()
	}
	*m = msg{class: -1}
	msgPool.Put(m)
}

// reserve counts cost against r's share and reports whether it fits. Called with r.mu held. It is the bound on a
// rank's unexpected queue:
//
// Messages that arrive before their receive wait in the receiver's unexpected queue. Those from other nodes are
// bounded by the network device (its credit, GOMPJ_UNEXPECTED_LIMIT split over the peers). Those from ranks of the
// same node are bounded here, per receiving rank: the eager messages queued at r hold at most r.share bytes
// (GOMPJ_UNEXPECTED_LIMIT divided among the node's ranks, at least MinUnexpectedShare; see UnexpectedShare).
//
//   - A sender that would queue an eager copy at r first calls r.reserve with the message's cost (eagerCost), under
//     r.mu. If it does not fit, the send goes rendezvous instead: the queue keeps a reference to the sender's
//     buffer (or an object's encoding), and the send completes only when a receive matches it, as MPI allows for a
//     standard send. So a rank that does not receive slows only the ranks that send to it, and nobody's memory
//     grows.
//   - Whatever takes a message off the queue gives its reservation back, under r.mu (takeUnexpected).
//   - A message costs what it holds: the message itself (payloads up to smallMsg travel inside it) and its
//     buffer's capacity. Empty messages therefore count too.
//   - Sends to oneself are not counted: a rank blocked in a send to itself could never receive it.
//   - No correct program deadlocks: a receive posted later matches a rendezvous message like any other, in the
//     queue's order, so every waiting send completes, and messages never overtake one another across the switch.
//
// The account is two words on the queue's own cache line, written only by whoever holds r.mu to queue or take a
// message, which it must do anyway: the bound adds no shared-line traffic. Any other way of buffering eager data
// for a rank of this node (per-pair rings, say) must reserve from the same account.
func (r *Rank) reserve(cost int64) bool {
	if r.held+cost > r.share {
		return false
	}
	r.held += cost
	return true
}

// eagerCost is what an eager message of n payload bytes holds while it waits at its receiver: the message, and a
// buffer beyond smallMsg (pooled buffers are whole size classes; an object's encoding, enc, is held as it is).
func eagerCost(n int, enc []byte) int64 {
	const self = int64(unsafe.Sizeof(msg{}))
	switch {
	case enc != nil:
		return self + int64(cap(enc))
	case n <= smallMsg:
		return self
	}
	if c := sizeClass(n); c >= 0 {
		return self + int64(64)<<c
	}
	return self + int64(n)
}

// takeUnexpected removes and returns the earliest unexpected message matching (ctx, source, tag), or nil, and
// gives its reservation back. Called with r.mu held.
func (r *Rank) takeUnexpected(ctx uint32, source, tag int32) *msg {
	it := r.unexp.Take(ctx, source, tag)
	if it == nil {
		return nil
	}
	m := (*msg)(unsafe.Pointer(it))
	r.held -= m.held
	m.held = 0
	m.taken()
	return m
}

// pushUnexpected queues m on r and wakes blocked probes. Called with r.mu held.
func (r *Rank) pushUnexpected(m *msg) {
	r.unexp.Push(&m.item)
	for i, p := range r.probers {
		p.Wake()
		r.probers[i] = nil
	}
	r.probers = r.probers[:0]
}

func envMatches(recv, m queues.Envelope) bool {
	return recv.Ctx == m.Ctx && (recv.Src == queues.AnySource || recv.Src == m.Src) &&
		(recv.Tag == queues.AnyTag || recv.Tag == m.Tag)
}

// claimSlot takes the slotted receive if it matches a message with envelope env. Safe without the lock.
func (r *Rank) claimSlot(env queues.Envelope) *request {
	rr, g, recv := r.peekSlot()
	if rr == nil || !envMatches(recv, env) || !rr.claim.CompareAndSwap(g, g+1) {
		return nil
	}
	return rr
}

// peekSlot returns the slotted receive if it is unclaimed, with its generation and envelope. The envelope is
// trusted only by a claim at generation g (a CAS from g), which fails if the receive was claimed since.
func (r *Rank) peekSlot() (*request, uint64, queues.Envelope) {
	rr := r.slot.Load()
	if rr == nil {
		return nil, 0, queues.Envelope{}
	}
	g := rr.claim.Load()
	if g&1 == 0 {
		return nil, 0, queues.Envelope{}
	}
	ce, tag := rr.src.Load(), rr.tag.Load()
	return rr, g, queues.Envelope{Ctx: uint32(ce >> 32), Src: int32(uint32(ce)), Tag: tag}
}

// takePosted removes and returns the earliest posted receive matching env, or nil. Called with r.mu held.
func (r *Rank) takePosted(env queues.Envelope) *request {
	if rr := r.claimSlot(env); rr != nil {
		return rr
	}
	if it := r.posted.Take(env); it != nil {
		return itemRequest(it)
	}
	return nil
}

// post queues receive rr with envelope e. Called with r.mu held, after unexp was searched.
func (r *Rank) post(rr *request, e queues.Envelope) {
	if r.posted.Len() == 0 {
		if s := r.slot.Load(); s == nil || s.claim.Load()&1 == 0 {
			rr.src.Store(uint64(e.Ctx)<<32 | uint64(uint32(e.Src)))
			rr.tag.Store(e.Tag)
			if s != rr {
				r.slot.Store(rr)
			}
			rr.claim.Add(1)
			return
		}
	}
	rr.item.Env = e
	r.posted.Push(&rr.item)
}

// header returns a header for a send to another node: the rank's spare, or a new one while another goroutine
// acting for the rank (a worker running its nonblocking collective) holds that. Give it back with putHeader.
func (rk *Rank) header() *device.Header {
	if h := rk.hdr.Swap(nil); h != nil {
		return h
	}
	return new(device.Header)
}

// putHeader makes h the rank's spare header; the device is done with it.
func (rk *Rank) putHeader(h *device.Header) { rk.hdr.Store(h) }

// deviceRouter is a device that passes messages on to other devices by destination (device.Router).
type deviceRouter interface {
	DeviceFor(rank int) device.Device
}

// sendDev returns the device a message to world rank dest goes to: the one dev routes it to, if known.
func (w *World) sendDev(dest int) device.Device {
	if dest >= 0 && dest < len(w.devOf) {
		if d := w.devOf[dest]; d != nil {
			return d
		}
	}
	return w.dev
}

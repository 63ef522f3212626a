package collectives

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gompj/gompj/queues"
	"github.com/gompj/gompj/ranks"
)

// Neighbourhood collectives (MPI-3 section 7.6): each rank sends to the destinations and receives from the
// sources of the communicator's topology (ranks.Comm.Neighbors), block j of the receive buffer from source j.
//
// The plan (nbrPlan) is built from the topology once, on a communicator's first neighbourhood collective, and kept
// in its state: the neighbour lists, the tag of each edge, which neighbours live on this node, their
// shared-memory slots, and a persistent request per edge. A call lays its blocks out as memory (once for a loop
// that passes the same buffers again: the plan keeps the last layout) and then, algorithm "p2p" (the default
// across nodes):
//
//   - it starts the receive of every edge, then the send of every edge, each the edge's persistent request run on
//     the call's block under the call's tag (ranks.StartMem), and waits for them all (ranks.WaitMem). These are
//     the Irecv, Isend and Waitall of a hand-written exchange, going the same way (inside a node: one copy into a
//     receive already posted, else eager or rendezvous), without a request to make, check and drop per message,
//     a Status per message, or any allocation.
//
// Algorithm "hybrid" (the default on a communicator within one node):
//
//   - neighbours on this node work through shared memory, as the other collectives do: a rank publishes its send
//     buffer and the layout of its blocks in its slot under the call's sequence number; each of its local
//     destinations copies its block straight from there into its own receive buffer (one copy) and acknowledges;
//     the rank returns once every local destination has. No lock, no queue, no matching;
//   - neighbours on other nodes get one message per edge, posted before the shared-memory copies start, so the
//     network transfers overlap them.
//
// Why hybrid on one node: in `gompj bench halo -np 4` (a call between barriers, the ways interleaved) hybrid took
// 0.50-0.60x the time of the same exchange by Isend/Irecv/Waitall up to 8 KiB blocks and 0.88-1.0x at 128 KiB,
// where p2p took 0.82-1.07x throughout; back to back (BenchmarkHalo2D, np 4) hybrid took 3.0-7.4 us per exchange
// up to 8 KiB against p2p's 7.6-21.9 us. (An earlier reading, that hybrid was the slower, came from the benchmark
// averaging its columns out of order.) Across nodes the two differ only in the edges inside a node, and
// 2 node processes x 2 ranks on 2 cores told them apart no better than their noise, so the messages' p2p, which
// needs no one to wait for a neighbour's arrival, stays. The table chooses by layout alone, not by size, so that
// members whose counts disagree still choose alike, and get ErrTruncate rather than a hang.
// p2p is a message exchange with less work per call than Isend/Irecv/Waitall: BenchmarkHalo2D under callgrind
// (GOMAXPROCS=1, the difference between 2500 and 500 exchanges), instructions per exchange, NeighborAlltoall
// against the hand-written form: one rank whose four edges lead to itself, 8 B 7.3k/8.5k, 512 B 7.6k/8.6k; four
// ranks on a 2x2 grid, 8 B 34k/43k, 512 B 39k/46k, 8 KiB 288k/303k, 128 KiB 232k/239k.
//
// ProcNull neighbours (past a non-periodic edge of a grid) send nothing, and their receive blocks are left
// untouched.
//
// Pairing the two ends of an edge: source entry j of rank r (peer s, label t) is the q-th entry of r's sources with
// that peer and label; it pairs with the q-th entry of s's destinations with peer r and label t. On a Cartesian
// grid, destination 2d (the -1 neighbour) has label 2d and destination 2d+1 label 2d+1, so that the block a rank
// sends to its -1 neighbour is received there as the block from the +1 neighbour (MPI-4's rule), also when both
// neighbours are one rank (a periodic dimension of 1 or 2). On graphs every label is 0 and occurrence order pairs
// repeated edges. Messages carry one tag, the call's operation id with base tag tagNeighbor (seq.go), so that any
// collectives may be outstanding beside them; the pairing is by posting order instead: each rank posts its sends,
// and its receives, in the order of their labels (stably), so that under MPI's non-overtaking rule the q-th message
// of a pair with label t meets the q-th receive of that pair with label t. The shared-memory path finds the paired
// destination index in the source's slot on first use.

type nbrPlan struct {
	srcs, dsts []int // comm ranks, ProcNull for none
	rtag, stag []int // edge tags (see above)
	rocc       []int // per source entry: earlier entries with the same peer and tag
	sendOrder  []int // destination indices in the order sends are posted (by label, stably)
	recvOrder  []int // source indices in the order receives are posted (by label, stably)
	err        error // the topology cannot carry neighbourhood collectives

	// shared memory with the neighbours on this node
	sh        *nbrShared
	mine      *nbrSlot
	srcSlot   []*nbrSlot // per source entry: its slot if the source is on this node
	srcBlock  []int      // per source entry on this node: the paired destination index at the source (-1: not yet known)
	dstLocal  []bool
	nLocalDst int
	seq       uint64 // shared-memory calls made
	acksWant  uint64 // acknowledgements of this rank's slot expected so far
	waker     *queues.Waker

	// The message path's requests: a persistent receive per source entry and a persistent send per destination
	// entry that is not ProcNull, made on the edge's first message and started on each call's block under the
	// call's tag (ranks.StartMem); the call's Waitall reports them, inactive again for the next call. So a call
	// posts the Irecvs and Isends of a hand-written exchange without making, checking and dropping a request per
	// message. started lists the call's, in posting order. The requests, like the layout below, keep the last
	// call's buffers reachable until the next call or the communicator's end.
	rreq, sreq []*ranks.Request
	started    []*ranks.Request

	// per call: the blocks, in elements, and as memory (per destination and source entry)
	sOff, sLen []int
	rOff, rLen []int
	sMem, rMem []ranks.Mem
	// what the blocks were laid out for: a call of the same collective on the same buffers as the previous one
	// (the exchange of a loop) finds them laid out already. Not kept for the v forms, whose counts may change.
	laidOut nbrKey
}

// nbrKey identifies a layout of blocks: the collective and its two buffers.
type nbrKey struct {
	valid  bool
	id     int // collID
	sv, rv bufKey
}

// bufKey identifies a buffer argument: its memory, and its element kind (Loc pairs travel as bytes).
type bufKey struct {
	k kind
	n int
	m ranks.Mem
}

func (b nbuf) key() bufKey {
	if b.view {
		return bufKey{k: b.k, n: b.n, m: b.m}
	}
	return bufKey{k: b.k, n: b.n, m: ranks.Mem{Ptr: unsafe.Pointer(unsafe.SliceData(b.b)), N: len(b.b)}}
}

// Collective ids of the neighbourhood collectives, for the table (chooseID) and the layout key.
var (
	idNbrAllgather  = collID("neighbor_allgather")
	idNbrAllgatherv = collID("neighbor_allgatherv")
	idNbrAlltoall   = collID("neighbor_alltoall")
	idNbrAlltoallv  = collID("neighbor_alltoallv")
)

// layout makes the blocks' memory from their offsets and lengths, and records what for (key; the zero key for
// none).
func (p *nbrPlan) layout(sv, rv nbuf, key nbrKey) {
	for k := range p.dsts {
		p.sMem[k] = sv.mem(p.sOff[k], p.sLen[k])
	}
	for j := range p.srcs {
		p.rMem[j] = rv.mem(p.rOff[j], p.rLen[j])
	}
	p.laidOut = key
}

// nbuf is a neighbourhood collective's buffer: contiguous memory (vec), or a View (m).
type nbuf struct {
	vec
	view bool
	m    ranks.Mem
}

// nbufOf resolves a send or receive argument.
func nbufOf(buf any, what, role string) (nbuf, error) {
	if v, ok := buf.(*ranks.View); ok {
		m, _ := ranks.MemOf(v)
		if m.Type == ranks.TypeNone {
			return nbuf{}, fmt.Errorf("%w: a nil or zero *View as the %s%s buffer", ranks.ErrBuffer, what, role)
		}
		return nbuf{vec: vec{k: kind(m.Type), n: m.N, sz: m.Type.Size()}, view: true, m: m}, nil
	}
	v, err := viewOfRole(buf, what, role)
	return nbuf{vec: v}, err
}

// mem is the typed memory of elements [off, off+n) of b (a window of a View is a value: it costs nothing). Loc
// pairs travel as bytes.
func (b nbuf) mem(off, n int) ranks.Mem {
	if b.view {
		return b.m.Window(off, n)
	}
	return memOf(b.vec, off, n)
}

// copyBlock copies n elements from element so of src to element do of dst: straight between strided buffers
// when either is a View.
func copyBlock(dst nbuf, do int, src nbuf, so, n int) {
	if !dst.view && !src.view {
		copy(dst.b[do*dst.sz:(do+n)*dst.sz], src.b[so*src.sz:(so+n)*src.sz])
		return
	}
	ranks.CopyMem(dst.mem(do, n), src.mem(so, n), n*src.sz)
}

// nbrShared is what the members of a communicator on one node share for their neighbourhood collectives.
type nbrShared struct {
	mu    sync.Mutex
	slots map[int]*nbrSlot // by comm rank; made by whichever end asks first
	ev    event
}

func (s *nbrShared) slot(rank int) *nbrSlot {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := s.slots[rank]
	if sl == nil {
		sl = &nbrSlot{}
		s.slots[rank] = sl
	}
	return sl
}

type nbrSlot struct {
	gen  atomic.Uint64 // the owner's latest published call
	acks atomic.Uint64 // its readers' acknowledgements, over all calls
	_    [cacheLine - 16]byte

	// Written once by the owner, before its first publication.
	dsts, stags []int
	// Written by the owner before each publication, read by its local destinations until they acknowledge.
	send       nbuf
	sOff, sLen []int
}

// neighbors returns c's neighbourhood plan, made on first use.
func (st *commState) neighbors(c *ranks.Comm) (*nbrPlan, error) {
	if p := st.nbr; p != nil {
		return p, p.err
	}
	kind := c.Topo()
	if kind == ranks.TopoNone {
		return nil, fmt.Errorf("%w: neighbourhood collectives need a communicator with a topology", ranks.ErrTopology)
	}
	srcs, dsts, err := c.Neighbors()
	if err != nil {
		return nil, err
	}
	p := &nbrPlan{srcs: srcs, dsts: dsts, rtag: make([]int, len(srcs)), stag: make([]int, len(dsts)),
		rocc: make([]int, len(srcs)), srcSlot: make([]*nbrSlot, len(srcs)), srcBlock: make([]int, len(srcs)),
		dstLocal: make([]bool, len(dsts)), sOff: make([]int, len(dsts)), sLen: make([]int, len(dsts)),
		rOff: make([]int, len(srcs)), rLen: make([]int, len(srcs)), rreq: make([]*ranks.Request, len(srcs)),
		sMem: make([]ranks.Mem, len(dsts)), rMem: make([]ranks.Mem, len(srcs)),
		sreq: make([]*ranks.Request, len(dsts)), started: make([]*ranks.Request, 0, len(srcs)+len(dsts))}
	if kind == ranks.TopoCart {
		for k := range dsts {
			p.stag[k] = k
		}
		for j := range srcs {
			p.rtag[j] = j ^ 1 // from the -1 neighbour (2d) comes what it sent up (2d+1), and the other way
		}
	}
	if kind == ranks.TopoGraph && !c.GraphSymmetric() {
		p.err = fmt.Errorf("%w: neighbourhood collectives on a graph need every edge's reverse (a graph rank's neighbours are both its sources and its destinations)", ranks.ErrTopology)
	}
	p.sendOrder, p.recvOrder = byLabel(p.stag), byLabel(p.rtag)
	type edge struct{ peer, tag int }
	seen := map[edge]int{}
	for j, s := range srcs {
		e := edge{s, p.rtag[j]}
		p.rocc[j] = seen[e]
		seen[e]++
	}
	w := c.World()
	lo, hi := w.Local()
	local := func(r int) bool {
		if r == ranks.ProcNull {
			return false
		}
		wr := c.WorldRank(r)
		return wr >= lo && wr < hi
	}
	anyLocal := false
	for k, d := range dsts {
		if local(d) {
			p.dstLocal[k] = true
			p.nLocalDst++
		}
	}
	for _, s := range srcs {
		anyLocal = anyLocal || local(s)
	}
	if anyLocal || p.nLocalDst > 0 {
		n := hi - lo
		p.sh = w.Shared(c, "github.com/gompj/gompj/collectives.nbr", func() any {
			s := &nbrShared{slots: make(map[int]*nbrSlot)}
			s.ev.waiters = make([]*queues.Waker, 0, n)
			return s
		}).(*nbrShared)
		p.mine = p.sh.slot(c.Rank())
		p.mine.dsts, p.mine.stags = dsts, p.stag
		for j, s := range srcs {
			if local(s) {
				p.srcSlot[j] = p.sh.slot(s)
				p.srcBlock[j] = -1
			}
		}
	}
	st.nbr = p
	return p, p.err
}

// byLabel returns the indices of labels, ordered by label, stably.
func byLabel(labels []int) []int {
	order := make([]int, len(labels))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return labels[order[a]] < labels[order[b]] })
	return order
}

// pairedBlock finds, in the slot of source entry j's rank, the destination index that sends to this rank on the
// same edge. The slot's lists were written before its first publication, which the caller has seen.
func (p *nbrPlan) pairedBlock(j, me int) (int, error) {
	sl := p.srcSlot[j]
	q := p.rocc[j]
	for k, d := range sl.dsts {
		if d == me && sl.stags[k] == p.rtag[j] {
			if q == 0 {
				return k, nil
			}
			q--
		}
	}
	return 0, fmt.Errorf("%w: rank %d does not send to rank %d as often as it is listed as a source", ranks.ErrTopology, p.srcs[j], me)
}

// memOf is the typed memory of elements [off, off+n) of v (Loc pairs travel as bytes).
func memOf(v vec, off, n int) ranks.Mem {
	b := v.b[off*v.sz : (off+n)*v.sz]
	t := ranks.Type(v.k)
	if v.k >= kLocFloat64 {
		t, n = ranks.TypeByte, len(b)
	}
	var m ranks.Mem
	m.Type, m.N = t, n
	if len(b) > 0 {
		m.Ptr = unsafe.Pointer(unsafe.SliceData(b))
	}
	return m
}

// run moves the blocks p.sOff/sLen of send to the destinations and receives p.rOff/rLen of recv from the sources.
func (p *nbrPlan) run(c *ranks.Comm, st *commState, id int, coll string, send, recv nbuf) error {
	algo, err := st.chooseID(id, coll, st.sel(true, 0))
	if err != nil {
		return err
	}
	hybrid := algo == "hybrid" && p.sh != nil
	tag := Tag(st.nextOp(), tagNeighbor) // one id per call on every member, whatever the path
	w := c.World()
	if hybrid {
		p.seq++
		if p.nLocalDst > 0 {
			sl := p.mine
			sl.send, sl.sOff, sl.sLen = send, p.sOff, p.sLen
			p.acksWant += uint64(p.nLocalDst)
			sl.gen.Store(p.seq)
			p.sh.ev.notify()
		}
	}
	cc := c.Coll()
	reqs := p.started[:0]
	for _, j := range p.recvOrder {
		s := p.srcs[j]
		if s == ranks.ProcNull || (hybrid && p.srcSlot[j] != nil) {
			continue
		}
		r, err := startEdge(&p.rreq[j], cc, p.rMem[j], s, tag, true)
		if err != nil {
			return firstErr(err, p.waitStarted(reqs))
		}
		reqs = append(reqs, r)
	}
	for _, k := range p.sendOrder {
		d := p.dsts[k]
		if d == ranks.ProcNull || (hybrid && p.dstLocal[k]) {
			continue
		}
		r, err := startEdge(&p.sreq[k], cc, p.sMem[k], d, tag, false)
		if err != nil {
			return firstErr(err, p.waitStarted(reqs))
		}
		reqs = append(reqs, r)
	}
	var first error
	if hybrid {
		me := c.Rank()
		for j, sl := range p.srcSlot {
			if sl == nil {
				continue
			}
			if err := p.wait(w, func() bool { return sl.gen.Load() >= p.seq }); err != nil {
				return err // aborted: the job is over
			}
			if p.srcBlock[j] < 0 {
				k, err := p.pairedBlock(j, me)
				if err != nil {
					first = firstErr(first, err)
					p.ack(sl)
					continue
				}
				p.srcBlock[j] = k
			}
			k := p.srcBlock[j]
			src := sl.send
			n := sl.sLen[k]
			switch {
			case src.k != recv.k:
				first = firstErr(first, fmt.Errorf("%w: %s: rank %d sends %s, received into %s", ranks.ErrType, coll, p.srcs[j], src.k, recv.k))
			case n > p.rLen[j]:
				first = firstErr(first, errTrunc("%s: %d elements from rank %d into a block of %d", coll, n, p.srcs[j], p.rLen[j]))
			default:
				copyBlock(recv, p.rOff[j], src, sl.sOff[k], n)
			}
			p.ack(sl)
		}
		if p.nLocalDst > 0 {
			acks, want := &p.mine.acks, p.acksWant
			if err := p.wait(w, func() bool { return acks.Load() >= want }); err != nil {
				return err
			}
		}
	}
	return firstErr(first, p.waitStarted(reqs))
}

// startEdge starts the message of one edge, on memory m under tag, with the edge's request *slot, made on first use.
func startEdge(slot **ranks.Request, cc *ranks.Comm, m ranks.Mem, peer, tag int, recv bool) (*ranks.Request, error) {
	r := *slot
	if r == nil {
		var err error
		if recv {
			r, err = cc.RecvInitMem(m, peer, tag)
		} else {
			r, err = cc.SendInitMem(m, peer, tag)
		}
		if err != nil {
			return nil, err
		}
		*slot = r
	}
	return r, ranks.StartMem(r, m, tag)
}

// waitStarted waits for the call's messages (reqs, from p.started) and keeps the list's memory.
func (p *nbrPlan) waitStarted(reqs []*ranks.Request) error {
	err := ranks.WaitMem(reqs)
	p.started = reqs[:0]
	return err
}

func (p *nbrPlan) ack(sl *nbrSlot) {
	sl.acks.Add(1)
	p.sh.ev.notify()
}

func (p *nbrPlan) wait(w *ranks.World, cond func() bool) error {
	if cond() {
		return nil
	}
	if p.waker == nil {
		p.waker = queues.GetWaker() // kept, as shmOp's
	}
	if p.sh.ev.wait(cond, nil, nil, p.waker, w.Policy(), w.AbortCh()) != waitDone {
		return fmt.Errorf("%w: %v", ranks.ErrAborted, w.AbortCause())
	}
	return nil
}

// nbrArgs resolves the buffers of a neighbourhood collective.
func nbrArgs(c *ranks.Comm, what string, send, recv any) (st *commState, p *nbrPlan, sv, rv nbuf, err error) {
	if st, err = start(c); err != nil {
		return
	}
	if p, err = st.neighbors(c); err != nil {
		return
	}
	if sv, err = nbufOf(send, what, " send"); err != nil {
		return
	}
	if rv, err = nbufOf(recv, what, " receive"); err != nil {
		return
	}
	if v, ok := recv.(*ranks.View); ok && rv.view && v.Overlaps() {
		// v.String(), not v: fmt holds its operands in a heap object while it formats them, and the blocking
		// calls' View handle may be on their caller's stack (hideArg), which may move meanwhile.
		err = fmt.Errorf("%w: %s: receiving into %s, whose blocks overlap", ranks.ErrBuffer, what, v.String())
		return
	}
	err = sameKind(sv.vec, rv.vec)
	return
}

// blocks fills offs and lens from counts and displacements (nil displs: packed) and checks them against a buffer
// of n elements.
func blocks(what string, offs, lens, counts, displs []int, n int) error {
	if len(counts) != len(offs) {
		return errArg("%s: %d counts for %d neighbours", what, len(counts), len(offs))
	}
	if displs != nil && len(displs) != len(offs) {
		return errArg("%s: %d displacements for %d neighbours", what, len(displs), len(offs))
	}
	at := 0
	for i, cnt := range counts {
		d := at
		if displs != nil {
			d = displs[i]
		}
		if cnt < 0 || d < 0 {
			return errArg("%s: count %d, displacement %d for neighbour %d", what, cnt, d, i)
		}
		// Not d+cnt > n: the sum overflowed for a huge count and displacement, and the block passed, to be
		// sliced out of memory far outside the buffer.
		if d > n || cnt > n-d {
			return errTrunc("%s: neighbour %d's block of %d at %d does not fit a buffer of %d elements", what, i, cnt, d, n)
		}
		offs[i], lens[i] = d, cnt
		at = d + cnt
	}
	return nil
}

// nbrResolved is a neighbourhood collective whose arguments are checked and whose blocks are laid out in its plan
// (p.sOff, sLen, rOff, rLen, valid until the communicator's next neighbourhood collective).
type nbrResolved struct {
	id     int
	coll   string
	st     *commState
	p      *nbrPlan
	sv, rv nbuf
}

func (r *nbrResolved) run(c *ranks.Comm) error { return r.p.run(c, r.st, r.id, r.coll, r.sv, r.rv) }

func resolveNeighborAllgather(c *ranks.Comm, send, recv any) (nbrResolved, error) {
	const what = "neighbor_allgather"
	st, p, sv, rv, err := nbrArgs(c, what, send, recv)
	if err != nil {
		return nbrResolved{}, err
	}
	key := nbrKey{true, idNbrAllgather, sv.key(), rv.key()}
	if p.laidOut == key {
		return nbrResolved{idNbrAllgather, what, st, p, sv, rv}, nil
	}
	m := sv.n
	if rv.n < len(p.srcs)*m {
		return nbrResolved{}, errTrunc("%s: %d blocks of %d elements into a buffer of %d", what, len(p.srcs), m, rv.n)
	}
	for k := range p.dsts {
		p.sOff[k], p.sLen[k] = 0, m
	}
	for j := range p.srcs {
		p.rOff[j], p.rLen[j] = j*m, m
	}
	p.layout(sv, rv, key)
	return nbrResolved{idNbrAllgather, what, st, p, sv, rv}, nil
}

func resolveNeighborAllgatherv(c *ranks.Comm, send, recv any, counts, displs []int) (nbrResolved, error) {
	const what = "neighbor_allgatherv"
	st, p, sv, rv, err := nbrArgs(c, what, send, recv)
	if err != nil {
		return nbrResolved{}, err
	}
	p.laidOut = nbrKey{}
	if err := blocks(what+" receive", p.rOff, p.rLen, counts, displs, rv.n); err != nil {
		return nbrResolved{}, err
	}
	for k := range p.dsts {
		p.sOff[k], p.sLen[k] = 0, sv.n
	}
	p.layout(sv, rv, nbrKey{})
	return nbrResolved{idNbrAllgatherv, what, st, p, sv, rv}, nil
}

func resolveNeighborAlltoall(c *ranks.Comm, send, recv any) (nbrResolved, error) {
	const what = "neighbor_alltoall"
	st, p, sv, rv, err := nbrArgs(c, what, send, recv)
	if err != nil {
		return nbrResolved{}, err
	}
	key := nbrKey{true, idNbrAlltoall, sv.key(), rv.key()}
	if p.laidOut == key {
		return nbrResolved{idNbrAlltoall, what, st, p, sv, rv}, nil
	}
	out, in := len(p.dsts), len(p.srcs)
	var m int
	switch {
	case out > 0:
		if sv.n%out != 0 {
			return nbrResolved{}, errArg("%s: a send buffer of %d elements for %d destinations", what, sv.n, out)
		}
		m = sv.n / out
	case in > 0:
		if rv.n%in != 0 {
			return nbrResolved{}, errArg("%s: no destinations, and a receive buffer of %d elements for %d sources", what, rv.n, in)
		}
		m = rv.n / in
	}
	if rv.n < in*m {
		return nbrResolved{}, errTrunc("%s: %d blocks of %d elements into a buffer of %d", what, in, m, rv.n)
	}
	for k := range p.dsts {
		p.sOff[k], p.sLen[k] = k*m, m
	}
	for j := range p.srcs {
		p.rOff[j], p.rLen[j] = j*m, m
	}
	p.layout(sv, rv, key)
	return nbrResolved{idNbrAlltoall, what, st, p, sv, rv}, nil
}

func resolveNeighborAlltoallv(c *ranks.Comm, send any, sendCounts, sendDispls []int, recv any, recvCounts, recvDispls []int) (nbrResolved, error) {
	const what = "neighbor_alltoallv"
	st, p, sv, rv, err := nbrArgs(c, what, send, recv)
	if err != nil {
		return nbrResolved{}, err
	}
	p.laidOut = nbrKey{}
	if err := blocks(what+" send", p.sOff, p.sLen, sendCounts, sendDispls, sv.n); err != nil {
		return nbrResolved{}, err
	}
	if err := blocks(what+" receive", p.rOff, p.rLen, recvCounts, recvDispls, rv.n); err != nil {
		return nbrResolved{}, err
	}
	p.layout(sv, rv, nbrKey{})
	return nbrResolved{idNbrAlltoallv, what, st, p, sv, rv}, nil
}

// NeighborAllgather sends send to every destination and receives from source j into block j of recv (blocks of
// len(send) elements).
func NeighborAllgather(c *ranks.Comm, sendArg, recvArg any) error {
	send, recv := hideArg(&sendArg), hideArg(&recvArg) // see hideArg
	r, err := resolveNeighborAllgather(c, send, recv)
	if err != nil {
		return err
	}
	started(c, ranks.CallNeighborAllgather, 0)
	return r.run(c)
}

// NeighborAllgatherv sends send to every destination and receives counts[j] elements from source j into recv at
// displs[j] (nil displs: packed in source order).
func NeighborAllgatherv(c *ranks.Comm, sendArg, recvArg any, counts, displs []int) error {
	send, recv := hideArg(&sendArg), hideArg(&recvArg) // see hideArg
	r, err := resolveNeighborAllgatherv(c, send, recv, counts, displs)
	if err != nil {
		return err
	}
	started(c, ranks.CallNeighborAllgather, 0)
	return r.run(c)
}

// NeighborAlltoall sends block k of send to destination k and receives block j of recv from source j. The block
// size is len(send) over the number of destinations (or, without destinations, len(recv) over the sources).
func NeighborAlltoall(c *ranks.Comm, sendArg, recvArg any) error {
	send, recv := hideArg(&sendArg), hideArg(&recvArg) // see hideArg
	r, err := resolveNeighborAlltoall(c, send, recv)
	if err != nil {
		return err
	}
	started(c, ranks.CallNeighborAlltoall, 0)
	return r.run(c)
}

// NeighborAlltoallv sends sendCounts[k] elements at sendDispls[k] of send to destination k and receives
// recvCounts[j] elements from source j into recv at recvDispls[j] (nil displacements: packed).
func NeighborAlltoallv(c *ranks.Comm, sendArg any, sendCounts, sendDispls []int, recvArg any, recvCounts, recvDispls []int) error {
	send, recv := hideArg(&sendArg), hideArg(&recvArg) // see hideArg
	r, err := resolveNeighborAlltoallv(c, send, sendCounts, sendDispls, recv, recvCounts, recvDispls)
	if err != nil {
		return err
	}
	started(c, ranks.CallNeighborAlltoall, 0)
	return r.run(c)
}

// For package nbc: the nonblocking and persistent neighbourhood collectives are one round of messages, an edge
// each, posted in the pairing order above; the Resolve functions check the arguments as the blocking calls do and
// list those messages.

// NbrEdge is one message of a neighbourhood collective: the neighbour and the typed memory (a block of the send
// or receive buffer, a window of it for a View).
type NbrEdge struct {
	Peer int
	Mem  ranks.Mem
}

// NbrCall is a resolved neighbourhood collective: its sends and receives in the order to post them, ProcNull
// neighbours left out.
type NbrCall struct {
	Coll         string
	Sends, Recvs []NbrEdge
}

// NeighborTag is the wire tag of every message of neighbourhood operation id.
func NeighborTag(id OpID) int { return Tag(id, tagNeighbor) }

func (r nbrResolved) call(err error) (NbrCall, error) {
	if err != nil {
		return NbrCall{}, err
	}
	p := r.p
	a := NbrCall{Coll: r.coll}
	for _, k := range p.sendOrder {
		if d := p.dsts[k]; d != ranks.ProcNull {
			a.Sends = append(a.Sends, NbrEdge{d, r.sv.mem(p.sOff[k], p.sLen[k])})
		}
	}
	for _, j := range p.recvOrder {
		if s := p.srcs[j]; s != ranks.ProcNull {
			a.Recvs = append(a.Recvs, NbrEdge{s, r.rv.mem(p.rOff[j], p.rLen[j])})
		}
	}
	return a, nil
}

// ResolveNeighborAllgather checks NeighborAllgather's arguments and lists its messages.
func ResolveNeighborAllgather(c *ranks.Comm, send, recv any) (NbrCall, error) {
	return withResolved(resolveNeighborAllgather(c, send, recv))
}

// ResolveNeighborAllgatherv checks NeighborAllgatherv's arguments and lists its messages.
func ResolveNeighborAllgatherv(c *ranks.Comm, send, recv any, counts, displs []int) (NbrCall, error) {
	return withResolved(resolveNeighborAllgatherv(c, send, recv, counts, displs))
}

// ResolveNeighborAlltoall checks NeighborAlltoall's arguments and lists its messages.
func ResolveNeighborAlltoall(c *ranks.Comm, send, recv any) (NbrCall, error) {
	return withResolved(resolveNeighborAlltoall(c, send, recv))
}

// ResolveNeighborAlltoallv checks NeighborAlltoallv's arguments and lists its messages.
func ResolveNeighborAlltoallv(c *ranks.Comm, send any, sendCounts, sendDispls []int, recv any, recvCounts, recvDispls []int) (NbrCall, error) {
	return withResolved(resolveNeighborAlltoallv(c, send, sendCounts, sendDispls, recv, recvCounts, recvDispls))
}

func withResolved(r nbrResolved, err error) (NbrCall, error) { return r.call(err) }

// CallKind returns the kind of the call check that a counts as.
func (a *NbrCall) CallKind() ranks.CallKind {
	if strings.HasPrefix(a.Coll, "neighbor_allgather") {
		return ranks.CallNeighborAllgather
	}
	return ranks.CallNeighborAlltoall
}

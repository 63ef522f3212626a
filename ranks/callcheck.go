package ranks

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/gompj/gompj/device"
)

// The call check.
//
// MPI has every member of a communicator call its collectives in the same order, and name the same root in a rooted
// one (bcast, reduce, gather, scatter). Inside a node the shared-memory paths see most disagreements about the root,
// since members publish what they called, and fail the call or end the job. Across nodes the node-aware and
// message-based algorithms cannot see a disagreement, and most hang on one: two ranks on different nodes that each name
// themselves root of a reduce or gather wait for each other for ever, at any size; two roots of a bcast or scatter
// send to each other, and at sizes that go rendezvous both wait for ever for the other's receive (small ones return,
// the members that followed the wrong root holding its data); a rank that skips a Barrier another calls, or calls
// Allreduce where another calls Bcast, leaves both waiting.
//
// So on a communicator that spans nodes each member logs its collective calls (noted by the API's entry points with
// NoteCall, logged by the collective with StartCall once the arguments pass its checks): the call's number among the
// communicator's collective calls on this member, the collective and its root, in a small ring (logLen calls). Now
// and then (CheckCalls, every GOMPJ_CALL_CHECK) the node publishes each log whose latest call has not changed since
// its last look, because its rank is stuck in that call or has gone on to other work: the call is compared with the
// logs of the node's ranks, and sent to the other nodes that host members of the communicator, which compare it with
// their ranks' logs at each of their looks for claimLife looks. Two members whose logs hold the same call with
// different collectives or roots end the job with ErrArg naming both, instead of hanging. What is stuck is always
// compared: the latest call of a stuck rank does not change. A disagreement that hangs nobody is caught only if a
// log keeps the call as its latest for a whole look.
//
// It costs a call one atomic store (its entry), and a job one small message per node holding a member for each call
// that a rank stays in (or after) for a look. Claims travel eagerly on a context no communicator has (checkCtx),
// which the sink hands to the check rather than to a rank's queues. Communicators inside one node process log
// nothing: there a Barrier of 2 ranks was 8 % slower with its log.

// CallKind names a collective call in the call check. The variants of one collective (Gather and Gatherv, an
// I-call and its blocking form, Init) are one kind: the check counts calls, and lets the members of one call mix
// them as long as their counts agree. (MPI matches no blocking call with a nonblocking one. Inside a node gompj's
// Barrier and Ibarrier meet all the same; a blocking call of another kind that waits in shared memory where a member
// made the nonblocking form ends the job with ErrArg: package nbc, callLook.) The constructors of communicators that
// every member of the communicator calls (Dup, Split, Create, the topologies) are one kind too.
type CallKind uint8

const (
	CallBarrier CallKind = 1 + iota
	CallBcast
	CallReduce
	CallAllreduce
	CallGather
	CallScatter
	CallAllgather
	CallAlltoall
	CallReduceScatter
	CallScan
	CallExscan
	CallNeighborAllgather
	CallNeighborAlltoall
	CallComm
	numCallKinds
)

var callNames = [numCallKinds]string{CallBarrier: "Barrier", CallBcast: "Bcast", CallReduce: "Reduce",
	CallAllreduce: "Allreduce", CallGather: "Gather", CallScatter: "Scatter", CallAllgather: "Allgather",
	CallAlltoall: "Alltoall", CallReduceScatter: "ReduceScatter", CallScan: "Scan", CallExscan: "Exscan",
	CallNeighborAllgather: "NeighborAllgather", CallNeighborAlltoall: "NeighborAlltoall",
	CallComm: "a communicator constructor"}

func (k CallKind) String() string {
	if k > 0 && k < numCallKinds {
		return callNames[k]
	}
	return fmt.Sprintf("CallKind(%d)", uint8(k))
}

// rooted reports whether calls of kind k name a root.
func (k CallKind) rooted() bool {
	return k == CallBcast || k == CallReduce || k == CallGather || k == CallScatter
}

// describeCall names a logged call for an error: its collective, and its root if it has one.
func describeCall(e uint64) string {
	if k := callKind(e); k.rooted() {
		return fmt.Sprintf("%s with root %d", k, callRoot(e))
	}
	return callKind(e).String()
}

const (
	logLen    = 8  // calls a log keeps
	claimLife = 32 // looks for which a node compares a published call with its ranks' logs
	maxClaims = 1024
	claimLen  = 20 // bytes of a claim on the wire (encodeClaim)
	// checkCtx is the context of claims: above every communicator's (maxCtxNumber) and every side context's.
	checkCtx = math.MaxUint32
	seqBits  = 28 // a call's number in an entry, modulo 1<<seqBits
	seqMask  = 1<<seqBits - 1
)

// An entry packs a logged call: its number (seqBits), collective (4 bits) and root (32 bits, a root that does not
// fit int32 as MinInt32: every member stores such a root alike). It is never 0, since the collective is not.
func packCall(seq uint64, k CallKind, root int) uint64 {
	r := int32(math.MinInt32)
	if root >= math.MinInt32 && root <= math.MaxInt32 {
		r = int32(root)
	}
	return (seq&seqMask)<<36 | uint64(k&15)<<32 | uint64(uint32(r))
}

func callSeq(e uint64) uint64    { return e >> 36 }
func callKind(e uint64) CallKind { return CallKind(e >> 32 & 15) }
func callRoot(e uint64) int      { return int(int32(uint32(e))) }
func validCall(e uint64) bool    { k := callKind(e); return k >= CallBarrier && k < numCallKinds }
func sameCall(a, b uint64) bool  { return callSeq(a) == callSeq(b) }

// callLog is one member's log of its collective calls on one communicator that spans nodes. Only the member's
// goroutine notes and starts calls (collectives on one communicator are never called by two goroutines at once,
// as MPI requires), so the count and the noted call are its own; the check reads the entries only, the one
// atomic store a call makes.
type callLog struct {
	ent     [logLen]atomic.Uint64
	n       uint64 // calls logged (the member's)
	pending uint64 // the call noted and not yet started (packCall with number 0), or 0 (the member's)

	// Set once when made.
	comm  weak.Pointer[Comm]
	id    uint64  // the communicator's job-wide identity (Comm.id)
	rank  int32   // the member's world rank
	dests []int32 // a member's world rank on each other node that hosts members: where its claims go

	// The check's own, under callCheck.mu.
	seen      uint64 // the latest call at the last look
	published bool   // seen has been published
}

// unlogged is the log of a communicator whose calls are not logged: inside one node, an intercommunicator, a
// single member, or a job that does not check.
var unlogged callLog

// latest returns the latest call logged, or 0 if there is none: the entry whose number is the highest, counting
// modulo 1<<seqBits, since the entries hold logLen consecutive numbers at most.
func (l *callLog) latest() uint64 {
	var best uint64
	for i := range l.ent {
		e := l.ent[i].Load()
		if e != 0 && (best == 0 || (callSeq(e)-callSeq(best))&seqMask < seqMask/2) {
			best = e
		}
	}
	return best
}

// find returns the logged call with the same number as e, or 0.
func (l *callLog) find(e uint64) uint64 {
	for i := range l.ent {
		if x := l.ent[i].Load(); x != 0 && sameCall(x, e) {
			return x
		}
	}
	return 0
}

// NoteCall notes a collective call of kind k on c with root (0 for the kinds that name none; see the call check):
// the API's entry points call it first, when Logs says so. The call is logged only once its arguments pass the
// collective's checks (StartCall): a call that fails them did not take place, and the rank calls again, as MPI's
// error handlers that return have a program do, so logging it would put its later calls out of step with the
// other members'. It is kept out of line, so that the entry points that test Logs first inline.
//
//go:noinline
func (c *Comm) NoteCall(k CallKind, root int) {
	if c == nil {
		return
	}
	l := c.calls.Load()
	if l == nil {
		l = c.newCallLog()
	}
	if l != &unlogged {
		l.pending = packCall(0, k, root)
	}
}

// Logs reports whether c may log its collective calls: it does not know yet (its first call decides), or it
// spans nodes. A test that inlines, so that the API's entry points on a communicator inside one node process (or
// with the check off) pay a load and a compare, not a call.
func (c *Comm) Logs() bool { return c != nil && !c.nolog.Load() }

// StartCall logs the call noted on c (NoteCall), if any: its arguments passed the collective's checks, and it
// starts. The collectives call it where they start; a call the API did not note (one a collective makes inside
// another, on a communicator of its own) logs nothing.
func (c *Comm) StartCall() {
	if c == nil {
		return
	}
	l := c.calls.Load()
	if l == nil || l == &unlogged || l.pending == 0 {
		return
	}
	l.n++
	l.ent[l.n%logLen].Store(l.pending | (l.n&seqMask)<<36)
	l.pending = 0
}

// newCallLog makes c's log on its first collective call.
func (c *Comm) newCallLog() *callLog {
	l := &unlogged
	if c.w.chk.on && c.remote == nil && c.size > 1 {
		if dests := c.otherNodes(); len(dests) > 0 {
			l = &callLog{comm: weak.Make(c), id: c.id(), rank: int32(c.r.id), dests: dests}
		}
	}
	if !c.calls.CompareAndSwap(nil, l) {
		return c.calls.Load()
	}
	if l == &unlogged {
		c.nolog.Store(true)
	} else {
		c.w.chk.add(l)
	}
	return l
}

// otherNodes returns, for each node other than this one that hosts members of c, its lowest member's world rank.
func (c *Comm) otherNodes() []int32 {
	here := c.w.nodeOf(c.r.id)
	seen := map[int]bool{here: true}
	var dests []int32
	for i := range c.size {
		wr := c.WorldRank(i)
		if n := c.w.nodeOf(wr); !seen[n] {
			seen[n] = true
			dests = append(dests, int32(wr))
		}
	}
	return dests
}

// claim is a call some member has published: compared with the node's logs until it is claimLife looks old.
type claim struct {
	id   uint64 // the communicator (Comm.id)
	call uint64 // the call (packCall)
	rank int32  // the member's world rank
	age  int
}

func encodeClaim(b []byte, cl claim) {
	binary.LittleEndian.PutUint64(b[0:], cl.id)
	binary.LittleEndian.PutUint64(b[8:], cl.call)
	binary.LittleEndian.PutUint32(b[16:], uint32(cl.rank))
}

// decodeClaim reads a claim that came from another node, for a job of size ranks.
func decodeClaim(b []byte, size int) (claim, error) {
	if len(b) != claimLen {
		return claim{}, fmt.Errorf("call-check claim of %d bytes, want %d", len(b), claimLen)
	}
	cl := claim{id: binary.LittleEndian.Uint64(b[0:]), call: binary.LittleEndian.Uint64(b[8:]),
		rank: int32(binary.LittleEndian.Uint32(b[16:]))}
	if !validCall(cl.call) {
		return claim{}, fmt.Errorf("call-check claim of unknown collective %d", uint8(callKind(cl.call)))
	}
	if cl.rank < 0 || int(cl.rank) >= size {
		return claim{}, fmt.Errorf("call-check claim from rank %d of a job of %d", cl.rank, size)
	}
	return cl, nil
}

// callCheck is a World's side of the call check.
type callCheck struct {
	on     bool // communicators that span nodes log their collective calls
	mu     sync.Mutex
	logs   []*callLog // the local ranks' logs
	claims []claim    // published calls still compared
}

func (k *callCheck) add(l *callLog) {
	k.mu.Lock()
	k.logs = append(k.logs, l)
	k.mu.Unlock()
}

// take queues a claim another node sent.
func (k *callCheck) take(cl claim) {
	k.mu.Lock()
	if len(k.claims) < maxClaims {
		k.claims = append(k.claims, cl)
	}
	k.mu.Unlock()
}

// CheckCalls is one look of the call check (see above): the node calls it every GOMPJ_CALL_CHECK. It publishes the
// logs whose latest call has not changed since the last look, compares every claim with the node's logs and ends
// the job on a disagreement. Claims are sent after the lock is let go: a device may hold a send until its progress
// loop moves, and the loop may be delivering a claim, which takes the lock.
func (w *World) CheckCalls() {
	k := &w.chk
	k.mu.Lock()
	type pub struct {
		l  *callLog
		cl claim
	}
	var out []pub
	live := k.logs[:0]
	for _, l := range k.logs {
		if c := l.comm.Value(); c == nil || c.freed.Load() {
			continue
		}
		live = append(live, l)
		e := l.latest()
		switch {
		case e == 0:
		case e != l.seen:
			l.seen, l.published = e, false
		case !l.published:
			l.published = true
			cl := claim{id: l.id, call: e, rank: l.rank}
			out = append(out, pub{l, cl})
			if len(k.claims) < maxClaims {
				k.claims = append(k.claims, cl)
			}
		}
	}
	clear(k.logs[len(live):])
	k.logs = live
	if err := k.compare(w); err != nil {
		k.mu.Unlock()
		w.Abort(err)
		return
	}
	kept := k.claims[:0]
	for _, cl := range k.claims {
		if cl.age++; cl.age < claimLife {
			kept = append(kept, cl)
		}
	}
	k.claims = kept
	k.mu.Unlock()

	for _, p := range out {
		if !w.sendClaim(p.l, p.cl) {
			k.mu.Lock()
			if p.l.seen == p.cl.call {
				p.l.published = false // the next look tries again
			}
			k.mu.Unlock()
		}
	}
}

// compare compares every claim with the node's logs, and returns the job's cause if one disagrees.
func (k *callCheck) compare(w *World) error {
	for _, cl := range k.claims {
		for _, l := range k.logs {
			if l.id != cl.id {
				continue
			}
			if e := l.find(cl.call); e != 0 && e != cl.call {
				return w.disagreement(l, e, cl)
			}
		}
	}
	return nil
}

// sendClaim sends cl to the other nodes that host members of l's communicator. It reports false if a node had no
// eager credit to spare, so that the next look tries again; a node it cannot reach is the fault handling's.
func (w *World) sendClaim(l *callLog, cl claim) bool {
	b := make([]byte, claimLen)
	encodeClaim(b, cl)
	ok := true
	for _, dest := range l.dests {
		dev := w.sendDev(int(dest))
		if dev == nil || dev.EagerLimit(int(dest)) < claimLen {
			ok = false
			continue
		}
		h := &device.Header{Kind: device.KindEager, Type: uint8(TypeByte), Context: checkCtx, Source: l.rank,
			Dest: dest, Length: claimLen}
		_ = dev.SendEager(h, b, nil)
	}
	return ok
}

// disagreement is the job's cause when local log l holds call e where a member's claim cl has another.
func (w *World) disagreement(l *callLog, e uint64, cl claim) error {
	c := l.comm.Value()
	me, other := int(l.rank), int(cl.rank)
	if c != nil {
		me = c.rank
		for i := range c.size {
			if c.WorldRank(i) == int(cl.rank) {
				other = i
			}
		}
	}
	return &RankError{Rank: int(l.rank), Err: callsDisagree(" that spans nodes",
		fmt.Sprintf(" of its collective call %d", callSeq(e)), me, other, e, cl.call)}
}

// callsDisagree is the error for members me and other of a communicator (scope says which) whose calls at one point
// (at says which) are e and theirs: about their root, or about the collective.
func callsDisagree(scope, at string, me, other int, e, theirs uint64) error {
	which := "the root"
	if callKind(e) != callKind(theirs) {
		which = "the collective"
	}
	return fmt.Errorf("%w: the members of a communicator%s disagree about %s%s: rank %d called %s, rank %d called %s",
		ErrArg, scope, which, at, me, describeCall(e), other, describeCall(theirs))
}

// CallWord packs a collective call of kind k with root (0 for the kinds that name none), whose number is seq, into
// one word, as the call check logs calls (only the low 28 bits of seq are kept). Package collectives declares
// with it the call in which a member waits inside its node (shmOp.parking).
func CallWord(seq uint64, k CallKind, root int) uint64 { return packCall(seq, k, root) }

// SameCallNumber reports whether call words a and b (CallWord) carry the same call number.
func SameCallNumber(a, b uint64) bool { return sameCall(a, b) }

// CallsDisagree is the ErrArg error for members me and other of a communicator within one node process, whose
// calls at one point are e and theirs (CallWord).
func CallsDisagree(me, other int, e, theirs uint64) error {
	return callsDisagree("", "", me, other, e, theirs)
}

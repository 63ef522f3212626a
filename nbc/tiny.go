package nbc

import (
	"fmt"
	"runtime"
	"slices"
	"unsafe"

	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/queues"
	"github.com/gompj/gompj/ranks"
)

// Tiny calls: the nonblocking collectives of a communicator within one node whose contributions each fit in a
// slot's entry (inlineMax), or a little larger ones read straight from the members' buffers (directOK, below), run
// by the last member to arrive, for all.
//
// Such a call is over in less time than the machinery of an operation takes to run it: a schedule, its runs and
// their serialisation, the rank's list of active operations, the wait lists, a spinning Wait. An 8-byte Iallreduce
// and its Wait, in a loop on 2 ranks, took 2.6-2.8 us that way, against 0.8 for Allreduce. So a tiny call has no
// operation. Each member takes the slot and use that a shared-memory operation would (slotFor), copies its
// contribution into its entry with its call and a request (ranks.CollRequest), and counts itself among the use's
// arrivals (slot.arrivals). The member whose arrival completes the count does the whole collective at once, in its
// starting call: it checks the entries against each other, combines or copies the contributions into every
// member's receive buffer, completes every member's request, and marks the use over (slot.tdone). The others'
// starting calls return at once, and their Waits wait on their request's flag as for a message of the node. A
// member whose part is over once its contribution is in its entry (a reduce's or gather's other members) completes
// its request at its start (early), and a bcast's or scatter's reader is served as soon as both it and the root
// have arrived, by whichever of them comes second (serve).
//
// So a tiny call progresses without any call of its members after their start, needs no worker, and its Wait has
// nothing to run. A start whose slot is still in use (the slot's previous use unfinished: 16 operations
// outstanding, by default) waits a little (awaitSlot) but must not wait for long, since the members that hold it
// may be waiting for this rank; it then arrives later through an operation of its own (startLate), which a worker
// or the rank's completion calls run once the slot is free, as any shared-memory operation's acquire does. Members
// choose the tiny way by the call's size, as the algorithm table does (Call.Bytes); an erroneous program whose
// members' sizes fall either side of the limit meets in the same slot and use all the same, and every member
// counts its arrival, tiny or not (shmb.publish, shmb.count), so whoever completes the count fails the tiny
// members' requests (tinyMismatch) while the others' schedules check the entries as they do against each other.

// Calls a little larger (directMax, directCopyMax) go the same way, the runner reading each member's contribution
// straight from the member's own buffer instead of a copy in its entry (direct): the members' buffers are all in this
// process, and a member's send buffer stays as it is until its request completes. Such a member is done at its start
// only once its contribution has been read (a gather's member that pushes it: push), never before (early). The
// shared-memory schedule of those sizes had one member combine or copy everything too (a reduction under minChunk),
// through the operation's machinery: an Iallreduce of 1 KiB on 2 ranks took 2.1-2.9x Allreduce's time, against 1.0x at
// 8 bytes. In place, a member's contribution is its receive buffer, which the runner writes: it reads every
// contribution before it writes anything that one may live in. A reduction combines into the slot's scratch first
// (accumulator); a scan writes its members' results from the last down, each from the contributions of the members
// before it; an allgather in place reads each member's block from where it writes it; an alltoall with a member in
// place copies the contributions into the scratch first.

// directMax bounds what a direct call's runner combines for all (directOK): a reduction's vector, a scan's n of them,
// an alltoall's blocks where every rank has a processor. The shared-memory reductions below minChunk had a single
// member combine the whole vector too.
const directMax = minChunk

// directCopyMax bounds the bytes of a direct call that only copies: a bcast's vector and a scatter's blocks, which
// each reader copies for itself once it and the root have arrived (serve); a gather's and an allgather's blocks in
// all, which the shared-memory schedule's members copy one by one too; an alltoall's where ranks outnumber
// processors. 2 ranks, bench iX beside bench X, 3 alternated rounds, medians of the per-round ratios, against the
// shared-memory schedule: 64 KiB Ibcast 1.32 -> 1.09x, 128 KiB 1.28 -> 1.02x (1 MiB lost: 0.71 -> 1.14x); 32 KiB
// blocks Iscatter 2.29 -> 1.55x, Igather 2.41 -> 1.63x, Iallgather 2.01 -> 1.64x; an alltoall's 32 KiB blocks lost
// (1.76 -> 2.01x). 8 ranks on 2 cores: 128 KiB Ibcast 4.86-5.48 -> 3.51-3.68 us (Bcast 3.35-3.42), 16 KiB blocks
// Iscatter 1.86 -> 1.25x.
const directCopyMax = 8 * directMax

// directOK reports whether call a, on a communicator of n members within this node, too large for tinyOK, goes the tiny
// way all the same, its runner reading the members' buffers (see above). Like tinyOK it looks only at what the members'
// calls share, and at spare (spareProcs), which is the same for all of them. (A gather's members once waited here for
// the last to arrive, which where ranks outnumber processors is a round of them all: 1 KiB on 8 ranks and 2 cores,
// Igather 1.00 -> 2.68 us, Gather 0.61; they push their blocks now: push.) An allgather's or alltoall's members all
// wait for the last anyway, and where ranks outnumber processors the runner's copies take no more processor time than
// the members' own would, while an operation's machinery and rounds cost more: up to directCopyMax there (8 ranks on 2
// cores, against the shared-memory schedule: 1 KiB blocks Iallgather 2.29 -> 1.18x Allgather, Ialltoall 1.36 -> 0.93x;
// 2 KiB 2.07 -> 1.21x, 1.30 -> 1.13x; with 4 KiB, 1.27 -> 0.99x and 1.27 -> 1.28x, and with 16 KiB 1.27 -> 1.52x and
// 1.25 -> 2.45x, where the schedule's copies beside each other win).
//
// Where every rank has a processor, the schedule's members copy beside each other, and it wins above 32 KiB of
// blocks, now that its starts run their operations again through the memo (memo.go) and its members spin a little
// on each other (spinSoon). 2 ranks, one process interleaving the two forms, direct against the schedule, in times
// the blocking form's: 128 KiB of blocks Igather 1.75-1.77 against 1.37-1.38x, Iscatter 1.70-1.72 against
// 1.44-1.45x, Iallgather 1.78-1.82 against 1.29-1.43x (2 runs); 64 KiB Iallgather 1.82-1.95 against 1.64-1.65x (2
// runs), Igather 1.48-1.64 against 1.32-1.40x, Iscatter 1.50-1.53 against 1.38-1.41x (3 runs, once a rooted
// schedule's root and readers spun on each other: shmb.waitSoonIf); 32 KiB about even (Igather and Iscatter
// 1.60-1.71 against 1.57-1.86x; Iallgather 1.55-1.60 against 1.67-1.74x).
func directOK(a *collectives.Call, n int, spare bool) bool {
	if a.Object || a.RCounts != nil {
		return false
	}
	if a.Counts != nil {
		return a.Coll == "reduce_scatter" && a.Displs == nil && a.Bytes() <= directMax
	}
	switch a.Coll {
	case "bcast":
		return a.Bytes() <= directCopyMax
	case "reduce", "allreduce":
		return a.Bytes() <= directMax
	case "scan", "exscan": // the runner combines up to n contributions for each member
		return n*a.Bytes() <= directMax
	case "gather", "scatter":
		return n*a.Blk <= directCopyMax/4 || (!spare && n*a.Blk <= directCopyMax)
	case "allgather":
		return n*n*a.Blk <= directCopyMax/4 || (!spare && n*n*a.Blk <= directCopyMax)
	case "alltoall":
		return n*n*a.Blk <= directMax || (!spare && n*n*a.Blk <= directCopyMax)
	}
	return false
}

// smallOK reports whether call a on c goes the tiny way (tinyOK), its contributions in entries or read from the
// members' buffers (directOK): the starting calls', Init's and a node-aware op's phases' test.
func smallOK(c *ranks.Comm, a *collectives.Call) bool {
	return tinyOK(a, c.Size()) || directOK(a, c.Size(), spareProcs(c))
}

// direct reports whether a member contributing src reads it from its own buffer (see above): what tinyOK allows
// fits in an entry, what only directOK allows does not.
func direct(src []byte) bool { return len(src) > inlineMax }

// arrivalBits is how many bits of slot.arrivals count a use's members.
const arrivalBits = 20

// countArrival counts a member's arrival at use u of sl, of n members, and reports whether it completes the count.
func countArrival(sl *slot, u uint64, n int) bool {
	for {
		v := sl.arrivals.Load()
		nv := u<<arrivalBits | 1
		if v>>arrivalBits == u {
			nv = v + 1
		}
		if sl.arrivals.CompareAndSwap(v, nv) {
			return nv&(1<<arrivalBits-1) == uint64(n)
		}
	}
}

// lastOf reports whether a member arriving now at use u of sl, of n members, is its last: the n-1 others have
// counted themselves, and each member arrives once a use, so the count moves on only by this member's arrival.
func lastOf(sl *slot, u uint64, n int) bool {
	v := sl.arrivals.Load()
	return v>>arrivalBits == u && v&(1<<arrivalBits-1) == uint64(n-1)
}

// tinyOK reports whether call a, on a communicator of n members within this node, is tiny. Every member must come
// to the same answer, so it looks only at what the members' calls share: the collective and the size the table
// sees (Call.Bytes), times the members for the calls whose entries carry a block for each.
func tinyOK(a *collectives.Call, n int) bool {
	if a.Object || a.RCounts != nil {
		return false
	}
	if a.Counts != nil { // of the calls with counts, only a reduce_scatter's entries are whole vectors, as a reduce's
		return a.Coll == "reduce_scatter" && a.Displs == nil && a.Bytes() <= inlineMax
	}
	switch a.Coll {
	case "barrier":
		return true
	case "bcast", "reduce", "allreduce", "scan", "exscan", "gather", "allgather":
		return a.Bytes() <= inlineMax
	case "alltoall", "scatter":
		return n*a.Blk <= inlineMax
	}
	return false
}

// tinySrc returns what member r of n contributes to call a: what it copies into its entry.
func tinySrc(a *collectives.Call, r, n int) []byte {
	switch a.Coll {
	case "barrier":
		return nil
	case "bcast":
		if r == a.Root {
			return a.Recv
		}
		return nil
	case "scatter":
		if r == a.Root {
			return a.Send[:n*a.Blk]
		}
		return nil
	case "gather":
		if a.InPlace {
			return nil // the root's block is in its receive buffer already
		}
	case "allgather":
		if a.InPlace {
			return a.Recv[r*a.Blk : (r+1)*a.Blk]
		}
	case "alltoall":
		if a.InPlace {
			return a.Recv[:n*a.Blk] // copied into the entry before anybody writes the buffer
		}
	}
	return a.Send // reductions in place: Send is the receive buffer
}

// startTiny starts tiny call a (kept by the caller: the entries point at it until the use is over) on c, whose
// nbc state is cc, and returns its request.
func startTiny(c *ranks.Comm, cc *commCache, a *collectives.Call) *ranks.Request {
	collectives.NextOp(c) // as a built operation takes its id: members agree on every later one
	sl, u := slotFor(c, cc)
	if !slotFree(sl, u) && !awaitSlot(sl, u) {
		return startLate(c, a, sl, u)
	}
	r, n := c.Rank(), c.Size()
	sl.mem[r].callno = collectives.CallNumber(c) // for a member whose blocking call parks (callLook)
	if cc.ring.gated.Load() {
		sl.mem[r].bphase = collectives.BarrierPhase(c) // for a member parked on an Ibarrier here (gate.go)
	}
	if early(a, r, cc.ring.spare) && !direct(tinySrc(a, r, n)) {
		// Its request is made after the arrival: the others wait for the entry, not for this rank's request.
		tinyArrive(c, sl, u, r, n, a, ranks.Target{}, byColl)
		arrived(c, cc.ring) // gated again, after the arrival: a Barrier may have parked meanwhile (gate.go)
		return c.CollRequestDone()
	}
	if !served(a.Coll) && lastOf(sl, u, n) {
		// The last to arrive runs the use in its arrival, as a node-aware phase's does (tinySub.arrive): its request
		// is over before it is made, and the others' are completed sooner, without this one's taken first. (A bcast's
		// or scatter's reader is served through its request.)
		if err := tinyArrive(c, sl, u, r, n, a, ranks.Target{}, bySelf); err != nil {
			req := c.CollRequest()
			ranks.CompleteColl(req, err)
			return req
		}
		return c.CollRequestDone()
	}
	req := c.CollRequest()
	tinyArrive(c, sl, u, r, n, a, ranks.TargetOf(req), byColl)
	arrived(c, cc.ring)
	return req
}

// early reports whether member r's part of tiny call a is over once its contribution is in its entry, and its
// request completes at its start, as the blocking call returns at once there: a reduce's or a gather's members
// other than the root; and a bcast's or scatter's root when every rank of the node has a processor of its own
// (spare, ring.spare), since its data is in its entry and its buffer is free. Where ranks outnumber processors a
// root that goes on at once takes a processor its readers need: OSU's loop of Ibcast and Wait (and a barrier) among
// 8 ranks on 2 cores took 3.5-4.3 us with the root's request complete at its start, 2.5-2.7 without (Bcast 2.0);
// Iscatter 4.3-4.5 against 2.5-2.7 (Scatter 2.1-2.3). With a processor each (2 ranks on 2 cores) it is the other
// way: Ibcast 0.88-0.90 us against 1.01-1.10 waiting for its reader (Bcast 0.51-0.56), Iscatter 0.91 against
// 1.02-1.09 (Scatter 0.66-0.84), 3 alternated runs.
//
// An early member learns nothing of what its use's runner finds wrong (tinyEnd): if no member is left to tell (two
// ranks of a bcast that each name themselves root, both early), the runner ends the job, as the blocking calls do.
func early(a *collectives.Call, r int, spare bool) bool {
	switch a.Coll {
	case "reduce", "gather":
		return r != a.Root
	case "bcast", "scatter":
		return r == a.Root && spare
	}
	return false
}

// spareProcs reports whether every rank of c's node process has a processor of its own (see early). A variable, so
// that tests can choose.
var spareProcs = func(c *ranks.Comm) bool {
	lo, hi := c.World().Local()
	return hi-lo <= runtime.GOMAXPROCS(0)
}

// awaitSlot waits a little for use u-1 of sl to end, yielding, and reports whether it did: most often the slot is
// held by members a few calls behind this one, which need the processor to catch up (a rank that started many
// calls before its peers). It gives up after slotYields: those members may be waiting for this rank, and then the
// start must not wait (startLate).
func awaitSlot(sl *slot, u uint64) bool {
	for range slotYields {
		runtime.Gosched()
		if slotFree(sl, u) {
			return true
		}
	}
	return false
}

// slotYields: see awaitSlot. A few microseconds of yields: a round of a node's ranks, on a loaded node more.
const slotYields = 32

// slotFree reports whether use u-1 of sl is over: every member has finished it.
func slotFree(sl *slot, u uint64) bool {
	if sl.tdone.Load() >= u-1 {
		return true // a tiny use
	}
	for j := range sl.mem {
		if sl.mem[j].fin.Load() < u-1 {
			return false
		}
	}
	return true
}

// tinyArrive publishes member r's entry for use u of sl, whose slot's previous use is over, with what completes its
// request, req (none: early, or bySelf), of kind how, and counts its arrival; if that completes the count, it runs
// the use on behalf of member c (whose rank ends the job if the use fails and no member can be told: tinyEnd). It
// returns what the run found for member r, for a member that is told so (bySelf); nil if it did not run the use.
func tinyArrive(c *ranks.Comm, sl *slot, u uint64, r, n int, a *collectives.Call, req ranks.Target,
	how reqHow) error {
	me := &sl.mem[r]
	if a.Coll == "scatter" && r == a.Root && !a.InPlace {
		copy(a.Recv[:a.Blk], a.Send[r*a.Blk:]) // the root's own block: nobody serves it (rootedInto)
	}
	src := tinySrc(a, r, n)
	if direct(src) {
		me.inlen = int32(len(src))
		ownBlock(a, r)
	} else {
		me.inlen = int32(copy(me.inline[:], src))
		src = me.inline[:me.inlen]
	}
	me.req = req
	// The rest of the entry is most often what it was at the member's last use of the slot (the memo's call): it is
	// written only where it differs, so that the lines the use's runner read last time stay shared and only the
	// first one (gen, req, the data) moves. The fields a shared-memory schedule reads are set all the same, for
	// an erroneous use whose members went either way (see above).
	if !sameSlice(me.src, src) {
		me.src = src
	}
	if !sameSlice(me.dst, a.Recv) {
		me.dst = a.Recv
	}
	if me.blk != a.Blk {
		me.blk = a.Blk
	}
	if !sameSlice(me.counts, a.Counts) || me.displs != nil || me.rcounts != nil || me.rdispls != nil {
		me.counts, me.displs, me.rcounts, me.rdispls = a.Counts, nil, nil, nil
	}
	if me.coll != a.Coll {
		me.coll = a.Coll
	}
	if !me.tiny || me.call != a || me.how != how {
		me.tiny, me.call, me.how = true, a, how
	}
	me.gen.Store(u)
	if sl.list.n.Load() != 0 {
		sl.list.notify() // a member waiting for publications: only in an erroneous use (see above)
	}
	if served(a.Coll) {
		serve(sl, u, r, a.Root, a.Coll)
	} else if a.Coll == "gather" && r != a.Root && how == byColl && direct(src) && push(sl, u, r, a) {
		if !req.None() { // a chain's arrival has none (op.chainAgain)
			complete(me, req, nil)
			me.req = ranks.Target{}
		}
	}
	if countArrival(sl, u, n) {
		return runTiny(c, sl, u, r)
	}
	return nil
}

// ownBlock copies direct member r's block to itself of call a into its receive buffer, where the call has one and is
// not in place (an allgather's, an alltoall's, a gather's root's): at its arrival, beside the other members' copies,
// rather than by the use's runner after everyone's (runTiny skips a direct member's own block). 2 ranks, one process
// interleaving the two forms, 5 alternated runs, medians: 8 KiB blocks Iallgather 1.33 -> 1.00x Allgather (Igather's
// 32 KiB blocks stayed at 1.7x: its root most often arrives last and copies the other block too).
func ownBlock(a *collectives.Call, r int) {
	if a.InPlace {
		return // its own block is in place already
	}
	lo, hi := r*a.Blk, (r+1)*a.Blk
	switch {
	case a.Coll == "allgather" || a.Coll == "gather" && r == a.Root:
		if len(a.Recv) >= hi && len(a.Send) >= a.Blk {
			copy(a.Recv[lo:hi], a.Send[:a.Blk])
		}
	case a.Coll == "alltoall":
		if len(a.Recv) >= hi && len(a.Send) >= hi {
			copy(a.Recv[lo:hi], a.Send[lo:hi])
		}
	}
}

// push copies direct gather member r's block into the root's receive buffer at use u of sl, if the root has
// published its entry for the same gather, and marks it pushed (member.served): the member is then done at its
// arrival, as a bcast's reader that serves itself is, and the use's runner leaves its block alone. A member that
// arrives before the root leaves its block to the runner. Where ranks outnumber processors, waiting for the last
// member to arrive was a round of them all (1 KiB on 8 ranks and 2 cores: Igather 2.68 us against Gather's 0.61).
// Only a member whose request is a CollRequest pushes (byColl): it completes that request itself, here; and the
// runner reads pushed only after every member has counted itself, after its push.
func push(sl *slot, u uint64, r int, a *collectives.Call) bool {
	rt := &sl.mem[a.Root]
	if rt.gen.Load() != u || !rt.tiny || rt.coll != "gather" || rt.call.Root != a.Root || rt.call.Blk != a.Blk ||
		len(rt.dst) < (r+1)*a.Blk {
		return false // not yet there, or not the same gather: the runner copies, or tells what is wrong
	}
	copy(rt.dst[r*a.Blk:(r+1)*a.Blk], sl.mem[r].src[:a.Blk])
	sl.mem[r].served.Store(uint32(u))
	return true
}

// served reports whether the readers of coll are served as soon as they and the root have arrived (serve): the
// calls in which the root hands out what it published, bcast and scatter.
func served(coll string) bool { return coll == "bcast" || coll == "scatter" }

// serve is member r's part, at its arrival, of a tiny bcast or scatter, coll, from root, before the member counts
// itself (so that, once every member has counted, every reader has been served): a reader that finds the root
// published copies its data itself, and its request completes at its start; the root copies to the readers that
// came before it. Of a reader and the root that both look, claim lets one serve. So a reader waits for the root
// only, as in the blocking calls, not for the last member to arrive: among 8 ranks on 2 cores, that was a whole
// round of the ranks' goroutines (8-byte Ibcast: 3.9 us, against 0.7 for Bcast; Iscatter 7.8 against 2.2).
func serve(sl *slot, u uint64, r, root int, coll string) {
	if r != root {
		if sl.mem[root].gen.Load() == u {
			tryServe(sl, u, r, root, coll)
		}
		return
	}
	for j := range sl.mem {
		if j != root && sl.mem[j].gen.Load() == u {
			tryServe(sl, u, j, root, coll)
		}
	}
}

// tryServe copies root's data of a tiny bcast or scatter at use u to reader j, and completes j's request, unless
// it was served already.
func tryServe(sl *slot, u uint64, j, root int, coll string) {
	if req := claim(&sl.mem[j], u); !req.None() {
		err := rootedInto(sl, j, root, coll)
		if err != nil {
			sl.failed.Store(u)
		}
		complete(&sl.mem[j], req, err)
	}
}

// rootedInto copies the root's data of a tiny bcast or scatter (coll) into reader j's buffer (the whole of it, or
// block j), after checking the entries of both.
func rootedInto(sl *slot, j, root int, coll string) error {
	m, rt := &sl.mem[j], &sl.mem[root]
	switch {
	case j == root:
		return nil // its own part was done at its arrival (a late root's request comes here: startLate)
	case m.coll != coll:
		return collectives.Mismatch(j, m.coll, root, coll)
	case m.call.Root != root:
		return collectivesArg("%s: rank %d names root %d, rank %d root %d: the members disagree about the root",
			coll, j, m.call.Root, root, root)
	case !rt.tiny || rt.coll != coll:
		return collectives.Mismatch(j, coll, root, rt.coll)
	case rt.call.Root != root:
		return collectivesArg("%s: rank %d names root %d, rank %d root %d: the members disagree about the root",
			coll, j, root, root, rt.call.Root)
	}
	data := rt.src[:rt.inlen]
	if coll == "scatter" { // the root's block, as its send buffer has it: a reader's shorter buffer is truncated
		blk := rt.call.Blk
		data = data[j*blk : (j+1)*blk]
	}
	if len(m.dst) < len(data) {
		return truncf("%s of %d bytes from root %d into a buffer of %d", coll, len(data), root, len(m.dst))
	}
	copy(m.dst, data)
	return nil
}

// reqHow is what a tiny member's request is, so how its use's runner completes it.
type reqHow uint8

const (
	byColl       reqHow = iota // a CollRequest: ranks.CompleteColl
	byOp                       // an operation's (a late arrival: startLate): ranks.CompleteOp
	byPersistent               // a persistent tiny collective's (persistentTiny): ranks.CompletePersistentColl
	bySelf                     // none: the member arrives last, runs the use and takes its outcome (tinySub.arrive)
)

// complete completes member m's request req with err.
func complete(m *member, req ranks.Target, err error) {
	switch m.how {
	case byOp:
		req.CompleteOp(err)
	case byPersistent:
		req.CompletePersistentColl(err)
	default:
		req.CompleteColl(err)
	}
}

// claim takes member m's request at use u for completing, once, and returns it: none if it was taken already (a
// bcast's or scatter's reader served by the root and itself at once), or the member had none (early). Only those
// readers are served by more than one member; every other request of a use is completed by the one member that
// completes its arrivals.
func claim(m *member, u uint64) ranks.Target {
	for {
		s := m.served.Load()
		if s == uint32(u) {
			return ranks.Target{}
		}
		if m.served.CompareAndSwap(s, uint32(u)) {
			return m.req
		}
	}
}

// startLate starts tiny call a at use u of slot sl, which is still in use: an operation acquires the slot, as a
// shared-memory schedule's does, then arrives. Its request completes when the use does, by whoever runs it.
func startLate(c *ranks.Comm, a *collectives.Call, sl *slot, u uint64) *ranks.Request {
	o := newOp(c)
	s := &Schedule{}
	b := &shmb{s: s, r: c.Rank(), n: c.Size(), a: a}
	b.moveTo(sl, u, o)
	o.shm = b
	b.acquire()
	rg, phase, callno := cacheOf(c).ring, collectives.BarrierPhase(c), collectives.CallNumber(c)
	s.Do(func() error {
		b.me.bphase, b.me.callno = phase, callno // for members parked on an Ibarrier or a blocking call (gate.go)
		tinyArrive(c, b.sl, b.u, b.r, b.n, a, ranks.TargetOf(o.req), byOp)
		arrived(c, rg)
		return nil
	})
	o.m = Machine{s: s}
	o.m.Reset()
	o.tr = newTransport(o, c, len(s.Steps))
	o.onNode, o.small, o.byRound, o.lend = true, true, true, true
	o.setReq(c.OpRequest(o))
	ranks.Launch(o.req)
	o.run()
	o.started()
	return o.req
}

// persistentTiny makes the persistent request of tiny call a on c (persistentOp). It runs no operation: on a slot
// of its own, as any persistent shared-memory collective, each Start takes the slot's next use and arrives with the
// request itself, which the member completing the use's count completes (ranks.CompletePersistentColl), and its Wait
// waits on the request's flag. A run allocates nothing: no request, no closure.
func persistentTiny(c *ranks.Comm, a *collectives.Call) *ranks.Request {
	_, r := newPersistentTiny(c, a)
	return r
}

// newPersistentTiny is persistentTiny, with its recipe.
func newPersistentTiny(c *ranks.Comm, a *collectives.Call) (*tinyRecipe, *ranks.Request) {
	t := &tinyRecipe{c: c, a: a, r: c.Rank(), n: c.Size()}
	var release func()
	t.sl, release = persistentSlot(c, collectives.NextPersistent(c))
	return t, c.PersistentCollRequest(t, release)
}

// tinyRecipe is a persistent tiny collective's run (persistentTiny).
type tinyRecipe struct {
	c    *ranks.Comm
	a    *collectives.Call
	sl   *slot
	u    uint64
	r, n int
}

// StartColl implements ranks.CollStarter: one run, on the slot's next use. Its previous use is over but for its
// last steps: a Start comes only once this member's request of the previous run has completed, which the member
// that completed that use's count did after every member had arrived (no member's part is early here); that member
// now finishes the use (slot.tdone) and needs nobody for it, so waiting for it cannot deadlock.
func (t *tinyRecipe) StartColl(req *ranks.Request) error {
	if err := t.c.Check(); err != nil {
		return err
	}
	t.u++
	for i := 1; !slotFree(t.sl, t.u); i++ {
		if i%1024 == 0 {
			if err := t.c.Check(); err != nil { // an erroneous use whose other members never finish: the job ends
				t.u--
				return err
			}
		}
		runtime.Gosched()
	}
	tinyArrive(t.c, t.sl, t.u, t.r, t.n, t.a, ranks.TargetOf(req), byPersistent)
	return nil
}

// tinySub is a tiny call as a phase of a node-aware op (hier.go): it arrives when the op's schedule gets to it,
// once its slot is free, and completes when its use does; the op's hook on its request moves the op on.
type tinySub struct {
	o       *op
	c       *ranks.Comm
	a       *collectives.Call
	sl      *slot
	u       uint64
	req     ranks.Child        // its request, collected (and recycled) by the Poll that finds it done
	reqDone *queues.Completion // req's flag, found once (see posted)
	arrived bool
	done    bool
	err     error
}

// Begin implements Sub.
func (t *tinySub) Begin() error {
	t.req, t.reqDone, t.arrived, t.done, t.err = ranks.Child{}, nil, false, false, nil
	t.arrive()
	return nil
}

// arrive arrives at the phase's use if its slot is free; else the op waits on the slot's list of finishes.
func (t *tinySub) arrive() {
	if !slotFree(t.sl, t.u) {
		t.o.watchOn(&t.sl.flist)
		return
	}
	r, n := t.c.Rank(), t.c.Size()
	t.arrived = true
	// A phase's root of a bcast or scatter goes on at once whatever the processors (spare): its op's next step (the
	// leaders' phase over the network, or the end) does not take a processor its node's readers need, and waiting
	// for them delayed it. Not a direct one, whose buffer is read later.
	if early(t.a, r, true) && !direct(tinySrc(t.a, r, n)) {
		tinyArrive(t.c, t.sl, t.u, r, n, t.a, ranks.Target{}, byColl)
		t.done = true
		return
	}
	// The last to arrive runs the use itself, in its arrival: it needs no request to learn that the use is over, nor
	// what the run found (a leader coming back from the network to its node's last phase, whose members arrived while
	// it was away). A bcast's or scatter's reader is served through its request, so it takes one all the same.
	if !served(t.a.Coll) && lastOf(t.sl, t.u, n) {
		t.err = tinyArrive(t.c, t.sl, t.u, r, n, t.a, ranks.Target{}, bySelf)
		t.done = true
		return
	}
	t.req = t.c.CollChild()
	t.reqDone = t.req.Flag()
	tinyArrive(t.c, t.sl, t.u, r, n, t.a, t.req.Target(), byColl)
	// The hook after the arrival: a member whose arrival completed the use has run it, and its own request is done;
	// the op's run that called this sees it (Poll), where a hook would have kicked the op, signalling its rank to
	// sweep its operations for nothing. Armed on a flag done meanwhile, it reports so and never runs. It is the
	// inline one (op.runInline): whoever completes the use runs the op on.
	t.reqDone.OnComplete(t.o.inline)
}

// Poll implements Sub. It may be called again once done: it reports the same.
func (t *tinySub) Poll() (bool, error) {
	if !t.arrived {
		if t.arrive(); !t.arrived {
			return false, nil
		}
	}
	if !t.done && t.reqDone.Done() {
		t.err = t.req.Collect()
		t.req, t.done = ranks.Child{}, true
	}
	return t.done, t.err
}

// ready reports whether a Poll would move the phase on (transport.ready).
func (t *tinySub) ready() bool {
	if !t.arrived {
		return slotFree(t.sl, t.u)
	}
	return t.done || t.reqDone.Done()
}

// runTiny runs use u of sl, whose arrivals member self has just completed: the whole collective, for every member.
// It returns what it found for member self (see tinyArrive).
func runTiny(c *ranks.Comm, sl *slot, u uint64, self int) error {
	mem := sl.mem
	for j := range mem {
		if mem[j].gen.Load() != u || !mem[j].tiny {
			return tinyMismatch(sl, u, j, self)
		}
	}
	told := mem[self].how == bySelf
	a := mem[self].call
	// A bcast's or scatter's root serves the members that arrived before it (serve): if any member is one, another's
	// request may be completed already, by it, even in an erroneous use where the others started something else.
	claims := false
	for j := range mem {
		claims = claims || served(mem[j].coll)
	}
	if err := tinyCheck(mem, a, self); err != nil {
		tinyEnd(c, sl, u, claims, nil, err, told)
		return err
	}
	n := len(mem)
	switch a.Coll {
	case "bcast", "scatter": // the readers are served (serve): whoever is not, because of an error, is told here
		tinyEnd(c, sl, u, true, a, nil, told)
		return nil
	case "allreduce", "reduce":
		total := int(mem[self].inlen)
		acc := sl.accumulator(total)
		copy(acc, mem[n-1].src[:total])
		for i := n - 2; i >= 0; i-- {
			a.Kernel(acc, mem[i].src[:total])
		}
		if a.Coll == "reduce" {
			copy(mem[a.Root].dst, acc)
			break
		}
		for j := range mem {
			copy(mem[j].dst, acc)
		}
	case "reduce_scatter":
		// The whole vector in the slot's scratch, then each member's block (its count) into its receive buffer, at
		// its start in place too.
		total := int(mem[self].inlen)
		out := sl.accumulator(total)
		copy(out, mem[n-1].src[:total])
		for i := n - 2; i >= 0; i-- {
			a.Kernel(out, mem[i].src[:total])
		}
		off := 0
		for j := range mem {
			k := a.Counts[j] * a.Sz
			copy(mem[j].dst[:k], out[off:off+k])
			off += k
		}
	case "scan", "exscan":
		total := mem[self].inlen
		for j := n - 1; j >= 0; j-- { // from the last: in place, member j's result overwrites its contribution
			last := j
			if a.Coll == "exscan" {
				last = j - 1
			}
			if last < 0 {
				continue // exscan: rank 0's receive buffer is left alone
			}
			out := mem[j].dst[:total]
			copy(out, mem[last].src[:total])
			for i := last - 1; i >= 0; i-- {
				a.Kernel(out, mem[i].src[:total])
			}
		}
	case "gather":
		root, blk := &mem[a.Root], a.Blk
		for j := range mem {
			m := &mem[j]
			if j == a.Root && (m.call.InPlace || direct(m.src)) || m.served.Load() == uint32(u) {
				continue // in place, copied at the root's arrival (ownBlock), or pushed
			}
			copy(root.dst[j*blk:(j+1)*blk], m.src[:m.inlen])
		}
	case "allgather":
		blk := a.Blk
		for j := range mem {
			for i := range mem {
				if i != j || !direct(mem[j].src) { // a direct member's own block: at its arrival (ownBlock)
					copy(mem[j].dst[i*blk:(i+1)*blk], mem[i].src[:blk])
				}
			}
		}
	case "alltoall":
		blk, nb := a.Blk, n*a.Blk
		staged := sl.stageInPlace(mem, nb)
		for j := range mem {
			for i := range mem {
				if i == j && direct(mem[j].src) {
					continue // copied at its arrival (ownBlock), or in place
				}
				src := mem[i].src
				if staged != nil {
					src = staged[i*nb : (i+1)*nb]
				}
				copy(mem[j].dst[i*blk:(i+1)*blk], src[j*blk:(j+1)*blk])
			}
		}
	}
	tinyEnd(c, sl, u, false, nil, nil, told)
	return nil
}

// accumulator returns the slot's scratch of n bytes, where a use's runner combines a reduction (runTiny): within
// the slot, so that writing the result into the members' receive buffers overwrites no contribution still to be
// read (a direct member's in place is its receive buffer).
func (sl *slot) accumulator(n int) []byte {
	if n <= len(sl.scratch) {
		return sl.scratch[:n]
	}
	if cap(sl.big) < n {
		sl.big = make([]byte, n)
	}
	return sl.big[:n]
}

// stageInPlace copies a tiny alltoall's contributions, nb bytes each, into the slot's scratch one after the other
// and returns the copy, if one of them is a direct member's receive buffer (in place), whose blocks the run would
// overwrite before it had read them all; else nil, and the run reads them where they are.
func (sl *slot) stageInPlace(mem []member, nb int) []byte {
	for j := range mem {
		if mem[j].call.InPlace && direct(mem[j].src) {
			out := sl.accumulator(len(mem) * nb)
			for i := range mem {
				copy(out[i*nb:(i+1)*nb], mem[i].src[:nb])
			}
			return out
		}
	}
	return nil
}

// sameSlice reports whether a and b are the same slice: the same memory, length and capacity.
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && cap(a) == cap(b) && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// tinyCheck checks the members' entries of a tiny use against member self's call a: the same collective, root and
// contribution sizes. What it finds fails every member: each one's call is wrong for the others.
func tinyCheck(mem []member, a *collectives.Call, self int) error {
	for j := range mem {
		m := &mem[j]
		b := m.call
		switch {
		case b.Coll != a.Coll:
			return collectives.Mismatch(self, a.Coll, j, b.Coll)
		case b.Root != a.Root:
			return collectivesArg("%s: rank %d names root %d, rank %d root %d: the members disagree about the root",
				a.Coll, self, a.Root, j, b.Root)
		case a.Coll == "reduce_scatter" && !slices.Equal(b.Counts, a.Counts):
			return collectivesArg("reduce_scatter: rank %d gives counts %v, rank %d %v", self, a.Counts, j, b.Counts)
		case a.Coll == "bcast" || a.Coll == "barrier":
		case a.Coll == "scatter": // each reader's block is checked as it is served (rootedInto)
		case a.Coll == "gather" && j == a.Root && b.InPlace:
		case b.Blk != a.Blk || (a.Coll != "gather" && m.inlen != mem[self].inlen) ||
			(a.Coll == "gather" && int(m.inlen) != a.Blk):
			return collectivesArg("%s: rank %d contributes %d bytes, rank %d %d", a.Coll, self, mem[self].inlen, j,
				m.inlen)
		}
	}
	return nil
}

// tinyEnd ends use u of sl, run by member c: it completes the request of each member j whose request is still to
// complete (not early; with claims, not served: a bcast's or scatter's reader) with err, or if err is nil and rooted
// is a bcast or scatter, with what serving j (rootedInto) returns; then it marks the use over for every member
// (slot.tdone). That comes last: a member takes the slot again only once it is set, so the entries stay as they are
// until this is through. An err that reaches no member (every request early, or served without an error; told: the
// runner itself learns it, bySelf) ends the job (endJob): the members went on as if the call had succeeded. (No
// function argument: a closure would be allocated at every use, and a persistent collective's Start allocates
// nothing.)
func tinyEnd(c *ranks.Comm, sl *slot, u uint64, claims bool, rooted *collectives.Call, err error, told bool) {
	for j := range sl.mem {
		// req and call stay in the entry until its member's next use of the slot (see tinyArrive); a stale one is
		// never read again, since every look at an entry checks its gen first.
		req := sl.mem[j].req
		if req.None() {
			continue // early (a node-aware phase's bcast or scatter root too: tinySub): a claim would take its line
		}
		if claims && (rooted == nil || j != rooted.Root) { // nobody serves an agreed root: see serve
			req = claim(&sl.mem[j], u)
		}
		if req.None() {
			continue
		}
		e := err
		if e == nil && rooted != nil {
			e = rootedInto(sl, j, rooted.Root, rooted.Coll)
		}
		complete(&sl.mem[j], req, e)
		told = true
	}
	if err != nil && !told && sl.failed.Load() != u {
		endJob(c, err)
	}
	sl.tdone.Store(u)
	if sl.flist.n.Load() != 0 {
		sl.flist.notify() // an operation waiting to acquire the slot
	}
}

// endJob ends the job with err, which member c of a tiny use found when every member had gone on as if the call had
// succeeded (tinyEnd).
func endJob(c *ranks.Comm, err error) {
	if w := c.World(); !w.Aborted() {
		w.Abort(&ranks.RankError{Rank: c.WorldRank(c.Rank()), Err: fmt.Errorf("a small collective whose members "+
			"had all gone on found: %w", err)})
	}
}

// tinyMismatch ends use u of sl, whose arrivals are complete, when not every member went the tiny way (see above;
// other is one that did not): it fails the requests of those that did and marks them finished with the use. The
// others' schedules see what is wrong in their peers' entries. It returns the error of member self, if it went the
// tiny way (see tinyArrive).
func tinyMismatch(sl *slot, u uint64, other, self int) error {
	var first *member
	for j := range sl.mem {
		if m := &sl.mem[j]; m.gen.Load() == u && m.tiny {
			first = m
			break
		}
	}
	if first == nil {
		return nil // no member went the tiny way: a plain shared-memory use
	}
	var mine error
	for j := range sl.mem {
		m := &sl.mem[j]
		if m.gen.Load() != u || !m.tiny {
			continue
		}
		req := claim(m, u)
		m.fin.Store(u) // not tdone: the use is not over for the others
		err := fmt.Errorf("%w: collective mismatch: rank %d started a small %s (at most %d bytes), rank %d a larger "+
			"call or another collective", ranks.ErrArg, j, m.coll, inlineMax, other)
		if j == self {
			mine = err
		}
		if req.None() {
			continue // it completed at its start (early), or was served (a bcast's or scatter's reader)
		}
		complete(m, req, err)
	}
	if sl.flist.n.Load() != 0 {
		sl.flist.notify()
	}
	return mine
}

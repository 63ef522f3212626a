package nbc

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/internal/mem"
	"github.com/gompj/gompj/ranks"
)

// Shared-memory schedules, for a communicator whose members all live on this node: FastMPJ's slot protocol for
// nonblocking collectives (Ramos et al.), with its defects mended and extended to every collective.
//
// The members of a communicator share a ring of slots (GOMPJ_NBC_SLOTS, default 16). The k-th shared-memory
// operation a member starts on the communicator uses slot k mod N, for the (k/N+1)-th time: its use number u. Every
// member counts its operations alike (they start the communicator's collectives in the same order and choose
// algorithms alike), so they meet in the same slot at the same use. Each member's entry in a slot carries the last
// use its member published for (gen) and the last it finished, no longer touching the slot or anybody's buffers
// (fin); both only grow. Use u is over once every fin reaches u, and a member starts use u+1 only then (it acquires
// the slot). A member that waits for all to have published waits for every gen to reach u, reading each peer's
// data in the line that carries its gen. An operation that finds its slot busy
// waits: operations queue, never fail, and never deadlock, since an earlier operation on the slot needs nothing
// from a later one.
//
// Within a use, members publish slices of their buffers in their member entry and copy or combine straight from
// each other's memory, one copy per byte: readers copy from the root's published buffer (bcast, scatter), members
// copy into the root's (gather), reductions combine from the peers' buffers (in chunks shared among the members
// for large vectors; small contributions are copied into the slot, so that whoever published may finish at once).
// A member's publication (its entry's fields, then its gen set to u) happens before any reader looks at it
// (sync/atomic orders it), and a member finishes only once nobody reads its buffers any more. A small bcast's root
// and a small alltoall's members publish their data in their entries, so that nobody reads their buffers: the
// root finishes at once.
//
// The waits are Wait steps on conditions over the gens and fins; whoever moves one past a value someone waits for
// notifies the slot's wait list, which kicks the waiting operations (a waiter spinning on its operation is off the
// lists: it sees the change for itself, op.Spin). A kick hands an operation whose rank is
// busy computing to the node's worker pool, so that rank's share (its copy, its combine) is done on its behalf and
// the others are not held back.
//
// What the paper's protocol lacked: the root's completion counted itself ambiguously (here readers are counted, and
// the root waits for the n-1 others' fins); the tag and the slot's states shared one integer space (here uses are
// numbered apart from the state); a full ring threw an exception (here operations queue); nothing moved without the
// owner's Test or Wait (here kicks and workers move it).

const (
	inlineMax = 256 - 16 // a contribution up to this size is copied into the slot
	minChunk  = 16 << 10 // smallest share of a reduction given to one member
	ringKey   = "github.com/gompj/gompj/nbc.ring"
)

// defaultSlots is the ring's size when the World does not say (GOMPJ_NBC_SLOTS's default).
const defaultSlots = 16

// ring is the slots one communicator's members share; ops[i] is member i's count of operations started on it
// (only member i touches it).
type ring struct {
	slots []*slot
	ops   []paddedCount
	// spare: every rank of the node has a processor of its own (spareProcs), so a tiny bcast's or scatter's root
	// does not take one from its readers by going on at once (tiny.go: early)
	spare bool
	// gated: some member has called Ibarrier on the communicator (gate.go)
	gated atomic.Bool
}

type paddedCount struct {
	n uint64
	_ [56]byte
}

// slot: every member reads mem's header at every look at an entry, and the wait lists are written whenever an op
// joins or leaves one. A line apart (the padding), a join no longer takes the header's line from the readers
// (Iallreduce of 8 bytes, 2 ranks, with the member layout below: 2323 -> 2271 ns, medians of 5 alternated runs).
type slot struct {
	mem   []member
	_     [64]byte
	list  watchlist // ops waiting for members' publications
	_     [64]byte
	flist watchlist // ops waiting for finishes: to acquire the slot, or for the readers of their buffers
	_     [64]byte
	// arrivals counts the members published for the latest use, use<<arrivalBits | count (countArrival, tiny.go):
	// the member whose publication completes a use's count runs a tiny use for all, and then sets tdone to the use,
	// which is over for every member (allFinished): one line that it has just written, rather than every member's
	// fin, which every member's next start on the slot would have fetched from it
	arrivals atomic.Uint64
	tdone    atomic.Uint64
	// failed is the latest tiny use in which a member was served with an error (tryServe): it was told (tinyEnd)
	failed atomic.Uint64
	_      [40]byte
	// disputed is the latest use in which more than one member published as the root of a bcast, scatter or gather
	// (rooted): their finishes then tell the roots waiting for them at every finish. On a line of its own, which
	// only an erroneous program writes, since every finish with waiters reads it.
	disputed atomic.Uint64
	_        [56]byte

	// alltoall: claims[i*n+j] is the last use in which a member took the copy of block i->j (made on first use)
	claimsOnce sync.Once
	claims     []atomic.Uint64

	// scratch: a tiny reduction's result, which the use's runner combines there (runTiny: accumulator): the slot's
	// uses run one after the other, and a buffer on the runner's stack would escape to the heap through the kernel;
	// big is its extension for a call whose contributions the runner reads from the members' buffers (directMax)
	scratch [inlineMax]byte
	big     []byte
}

// member is one member's entry in a slot: what it publishes for the current use. Its gen, its fin, its collective's
// name and the start of its inline data share the entry's first cache line, so that a peer waiting for a small
// contribution gets them all in one transfer, and a member acquiring the slot reads the fin from the line it reads
// next anyway (8-byte Iallreduce, 2 ranks: 2588 -> 2290 ns against fin and the name on lines of their own, medians
// of 4 alternated runs). A member is a whole number of lines (TestMemberLayout), so every member of a slot's array
// starts at the same offset in a line as the first, which the allocator puts at most 8 bytes into one (its header).
type member struct {
	gen              atomic.Uint64 // the use it has published for
	fin              atomic.Uint64 // the last use it finished, no longer touching the slot or buffers (see slot.tdone)
	coll             string        // the collective the entry was published for: its readers check it (sameColl)
	inlen            int32         // the bytes of inline in use
	served           atomic.Uint32 // a tiny use (tiny.go): the use (its low 32 bits) whose request is completed
	req              ranks.Target  // a tiny use: what completes the member's request, in the line the runner reads
	inline           [inlineMax]byte
	root             int32 // a large reduction's root as the member names it, beside src (sameRoot)
	src, dst         []byte
	counts, displs   []int
	rcounts, rdispls []int         // alltoall: the receive buffer's layout
	recvDone         atomic.Uint64 // alltoall: blocks copied into dst in this use (n in all)
	sendDone         atomic.Uint64 // alltoall: blocks copied out of src in this use
	blk              int
	last             atomic.Pointer[op] // its operation of the slot's latest use, until done (acquire, op.forget)
	// a tiny use (tiny.go): the member published through the tiny protocol, with its call (req above); how: what
	// its request is, so how to complete it
	tiny bool
	how  reqHow
	call *collectives.Call
	// bphase: the member's barrier phase at its call, where some member has called Ibarrier (gate.go)
	bphase uint64
	// callno: the number of the member's call among its calls of the API on the communicator (collectives.
	// CallNumber), for a member whose blocking call waits in shared memory (callLook)
	callno uint64
	_      [8]byte // to 512 bytes: every member of the array starts at the same offset in a line (576 with reading)
	// reading: a rooted use's reader's declaration, the use (rootReads), in a line of its own that nobody writes
	// often: its readers poll their root's. In gen's line (member.served) or in a line that the root writes at each
	// use (displs), it took a 4 KiB Iscatter of 2 ranks 20-40 % longer.
	reading atomic.Uint64
	_       [56]byte
}

func newSlot(n int) *slot { return &slot{mem: make([]member, n)} }

// slotFor returns the slot and use of the next shared-memory operation of this rank on c's ring (cc: its nbc
// state on c).
func slotFor(c *ranks.Comm, cc *commCache) (*slot, uint64) {
	rg := ringOf(c, cc)
	k := rg.ops[c.Rank()].n
	rg.ops[c.Rank()].n++
	return rg.at(k)
}

// at returns the slot and use of position k of the ring.
func (rg *ring) at(k uint64) (*slot, uint64) {
	return rg.slots[k%uint64(len(rg.slots))], k/uint64(len(rg.slots)) + 1
}

// ringOf returns the ring of c's members (cc: this member's nbc state on c).
func ringOf(c *ranks.Comm, cc *commCache) *ring {
	rg := cc.ring
	if rg == nil { // the first time on c: the members' shared ring, found once and kept (World.Shared locks)
		n := c.Size()
		rg = c.World().Shared(c, ringKey, func() any {
			k := c.World().NbcSlots()
			if k <= 0 {
				k = defaultSlots
			}
			r := &ring{slots: make([]*slot, k), ops: make([]paddedCount, n), spare: spareProcs(c)}
			for i := range r.slots {
				r.slots[i] = newSlot(n)
			}
			return r
		}).(*ring)
		cc.ring = rg
	}
	return rg
}

// persistentSlot returns a persistent collective's own slot (its id names it), and the function that gives it up
// when the collective is released (Free): every member of c on this node gives it up, and it is forgotten
// (World.Unshare).
func persistentSlot(c *ranks.Comm, id collectives.OpID) (*slot, func()) {
	n, key := c.Size(), fmt.Sprintf("%s/persistent/%d", ringKey, id)
	sl := c.World().Shared(c, key, func() any { return newSlot(n) }).(*slot)
	return sl, func() { c.World().Unshare(c, key) }
}

// shmb builds, and then serves at run time, one member's schedule of one shared-memory operation. The closures of
// the schedule read the slot and use through it, never a copy: a persistent operation moves to its next use at
// each Start, a reused one to another slot (moveTo).
type shmb struct {
	s     *Schedule
	sl    *slot
	me    *member
	r, n  int
	u     uint64
	prev  *op // this member's operation of the previous use of the slot
	seen  int // the members seen published for use u (allPublished)
	freed int // the members seen finished with the slot's previous use (acquire)
	fseen int // the members seen finished with use u (waitFinished)
	a     *collectives.Call
	acc   []byte   // reductions: the block being combined
	dsts  [][]byte // reductions: where combined blocks go
	out   []byte   // reduce_scatter in place: the block, until the others are done reading
	own   []byte   // alltoall and exscan in place: a copy of the input
	done  []bool   // alltoall: the peers whose blocks this member has moved (or found moved) in this use
	err   error    // alltoall: the first error in the blocks this member moved
	// spinSoon: the run may spin a little on the others' arrivals (waitArrived) and, once all have arrived, on their
	// finishes (waitFinished), since every rank of the node has a processor (spareProcs) and the call is at most
	// soonMax
	spinSoon bool
	// on the ring of communicator c (not a persistent op's slot of its own): where an arrival wakes the members
	// parked on an Ibarrier (gate.go), and the member's barrier phase at the call's start, for its entry
	c      *ranks.Comm
	rg     *ring
	bphase uint64
	callno uint64 // the call's number (member.callno)
}

// acquire waits until the slot's previous use is over. While it waits it helps this member's operation of that use
// along: with no worker pool (GOMPJ_ASYNC_PROGRESS=0) nothing else would move it if the owner waits on this one.
func (b *shmb) acquire() {
	b.s.Wait(func() bool {
		if b.allFinished(&b.freed, b.u-1) {
			return true
		}
		if p := b.prev; p != nil && !p.done.Load() {
			p.run()
		}
		return b.allFinished(&b.freed, b.u-1)
	}, &b.sl.flist)
}

// allFinished reports whether every member has finished use u, resuming where its last look stopped (at *from:
// fins only grow).
func (b *shmb) allFinished(from *int, u uint64) bool {
	if b.sl.tdone.Load() >= u {
		return true // a tiny use, over for all (tiny.go)
	}
	for ; *from < len(b.sl.mem); *from++ {
		if b.sl.mem[*from].fin.Load() < u {
			return false
		}
	}
	return true
}

// publish makes this member's entry for the use visible, with the collective it is for (sameColl), and counts it
// among the use's arrivals (countArrival): if it is the last of them and members of the use went the tiny way (an
// erroneous program, whose members' sizes fall either side of the tiny limit), it fails their requests
// (tinyMismatch).
func (b *shmb) publish() {
	b.me.coll, b.me.tiny, b.me.bphase, b.me.callno = b.a.Coll, false, b.bphase, b.callno
	b.me.gen.Store(b.u)
	b.count()
}

// count counts this member among the use's arrivals (countArrival), as publish does, for a member that reads its
// peers' entries without publishing its own (a rooted collective's reader, a scan's last member): the tiny members
// of an erroneous use wait for every member's arrival.
func (b *shmb) count() {
	if countArrival(b.sl, b.u, b.n) {
		tinyMismatch(b.sl, b.u, b.r, -1) // this member went the shared-memory way: its schedule sees for itself
	} else if b.rg != nil {
		arrived(b.c, b.rg) // gate.go
	}
}

// onRing notes, at the start of a call (on its member's goroutine), that the schedule runs on c's ring, and the
// member's barrier phase, for count.
func (b *shmb) onRing(c *ranks.Comm) {
	b.c, b.rg, b.callno = c, cacheOf(c).ring, collectives.CallNumber(c)
	if b.rg.gated.Load() {
		b.bphase = collectives.BarrierPhase(c)
	}
}

// arrive publishes this member's entry for the use and, if every member has now published, tells the ops waiting
// for that (waitArrived). Of members publishing at once, at least the last one to publish sees all.
func (b *shmb) arrive() {
	b.publish()
	if b.allPublished() {
		b.sl.list.notify()
	}
}

// sameColl checks that every member published its entry for the same collective as this one. Members of an
// erroneous program that started different collectives at this point would read each other's entries as their own:
// an Ibcast's root's buffer as an Iallreduce's contribution gave a wrong sum, silently.
func (b *shmb) sameColl() error {
	for j := range b.sl.mem {
		if c := b.sl.mem[j].coll; c != b.a.Coll {
			return collectives.Mismatch(b.r, b.a.Coll, j, c)
		}
	}
	return nil
}

// sameRoot checks that every member published for a large reduce with the root this one names. Of two members that
// each take themselves for the root, each would have its members' shares combined into its own buffer, and hold
// part of the sum; every member sees every entry, so all of them fail alike. (A small reduce's roots each combine
// every contribution themselves, and hold the whole sum.)
func (b *shmb) sameRoot() error {
	for j := range b.sl.mem {
		if r := int(b.sl.mem[j].root); r != b.a.Root {
			return collectivesArg("reduce: rank %d names root %d, rank %d root %d: the members disagree about the root",
				b.r, b.a.Root, j, r)
		}
	}
	return nil
}

// allPublished reports whether every member has published for the use. It resumes where its last look stopped
// (seen): gens only grow, and a waiter looks again and again.
func (b *shmb) allPublished() bool {
	for ; b.seen < len(b.sl.mem); b.seen++ {
		if b.sl.mem[b.seen].gen.Load() < b.u {
			return false
		}
	}
	return true
}

// finish marks this member done with the use (its fin: a store to its own entry, rather than an add to a counter
// that all members write). It tells the ops waiting for finishes, on their own list, once at most one member has
// still to finish (a root waits for the n-1 others, the slot's next use for all): most uses have none waiting (an
// inline allreduce's members wait only for publications), and kicking the publication waiters again at every
// finish made each of them run, or its rank wake, once more for nothing.
func (b *shmb) finish() {
	b.me.fin.Store(b.u)
	if b.sl.flist.n.Load() == 0 {
		return
	}
	left := 0
	for j := range b.sl.mem {
		if b.sl.mem[j].fin.Load() < b.u {
			left++
		}
	}
	if left <= 1 || b.sl.disputed.Load() == b.u {
		b.sl.flist.notify()
	}
}

// waitSoonIf is Wait, spinning a little first (arrivePolicy) where the members spin on each other (spinSoon): for
// the others' arrivals (waitArrived), a rooted call's root for its readers, or a reader for its root.
func (b *shmb) waitSoonIf(cond func() bool, list *watchlist) {
	if b.spinSoon {
		b.s.WaitSoon(cond, list, &arrivePolicy)
		return
	}
	b.s.Wait(cond, list)
}

func (b *shmb) waitArrived() { b.waitSoonIf(b.allPublished, &b.sl.list) }

// waitFinished waits until every member has finished the use (a root waiting for its readers: readersDone). With
// soon, every member has arrived and is doing its share (combining or copying), and the run spins a while before it
// waits as for anything else (Schedule.WaitSoon; spinSoon says whether it may).
func (b *shmb) waitFinished(soon bool) {
	cond := func() bool { return b.allFinished(&b.fseen, b.u) }
	if soon && b.spinSoon {
		b.s.WaitSoon(cond, &b.sl.flist, &finishPolicy)
		return
	}
	b.s.Wait(cond, &b.sl.flist)
}

func (b *shmb) waitGen(j int) {
	b.s.Wait(func() bool { return b.sl.mem[j].gen.Load() >= b.u }, &b.sl.list)
}

// buildShm appends the shared-memory schedule of sp's call on c to s.
func buildShm(s *Schedule, sp *spec, c *ranks.Comm, o *op, persistent bool) error {
	var sl *slot
	var u uint64
	if persistent {
		var release func()
		sl, release = persistentSlot(c, sp.id)
		u = 0 // each Start moves it on (onStart): the first run is use 1
		if o != nil {
			o.release = append(o.release, release)
		}
	} else {
		sl, u = slotFor(c, cacheOf(c))
	}
	if err := buildShmSlot(s, sp, sl, u, o, persistent, spareProcs(c) && soonOK(sp.a, sp.n)); err != nil {
		return err
	}
	if !persistent && o != nil {
		o.shm.onRing(c)
	}
	return nil
}

// buildShmSlot appends the schedule of sp's call at use u of slot sl; spinSoon: see shmb.
func buildShmSlot(s *Schedule, sp *spec, sl *slot, u uint64, o *op, persistent, spinSoon bool) error {
	b := &shmb{s: s, r: sp.rank, n: sp.n, a: sp.a, spinSoon: spinSoon}
	b.moveTo(sl, u, o)
	if persistent {
		b.prev = nil // its own slot: its previous use is its own previous run, over before Start
		o.onStart = append(o.onStart, func() { b.u++; b.seen, b.freed, b.fseen = 0, 0, 0 })
	}
	if o != nil {
		o.shm = b
	}
	return b.build()
}

// moveTo points the schedule at use u of slot sl (a new operation, or one reused: cache.go).
func (b *shmb) moveTo(sl *slot, u uint64, o *op) {
	b.sl, b.me, b.u, b.seen, b.freed, b.fseen = sl, &sl.mem[b.r], u, 0, 0, 0
	b.prev = b.me.last.Swap(o)
	if b.prev == o {
		// A kept op back on the slot it last used (cache.go): that run is over (it was reused only once done), and
		// acquire must not run the op from inside its own run, which would mark it dirty and make the run go
		// round again at once, for as long as the slot stays busy.
		b.prev = nil
	}
}

func (b *shmb) build() error {
	a, r := b.a, b.r
	switch a.Coll {
	case "barrier":
		b.acquire()
		b.s.Do(func() error { b.arrive(); return nil })
		b.waitArrived()
		b.s.Do(func() error { b.finish(); return nil })
	case "bcast":
		inline := len(a.Recv) <= inlineMax
		b.rooted(func() error {
			b.me.src = a.Recv
			if inline {
				b.me.inlen = int32(mem.Copy(b.me.inline[:], a.Recv))
				b.me.src = b.me.inline[:b.me.inlen]
			}
			return nil
		}, nil, func(root *member) error {
			if len(root.src) > len(a.Recv) {
				return truncf("bcast of %d bytes from root %d into a buffer of %d", len(root.src), a.Root, len(a.Recv))
			}
			mem.Copy(a.Recv, root.src)
			return nil
		}, inline)
	case "scatter", "scatterv":
		recv := a.Recv
		if a.InPlace {
			recv = nil
		}
		b.rooted(func() error {
			b.me.src, b.me.counts, b.me.displs, b.me.blk = a.Send, a.Counts, a.Displs, a.Blk
			return nil
		}, func() error {
			if recv == nil {
				return nil
			}
			blk := blockOf(a.Send, a.Counts, a.Displs, a.Sz, r, a.Blk)
			if len(blk) > len(recv) {
				return truncf("%s: %d bytes for the root into a buffer of %d", a.Coll, len(blk), len(recv))
			}
			mem.Copy(recv, blk)
			return nil
		}, func(root *member) error {
			blk := blockOf(root.src, root.counts, root.displs, a.Sz, r, root.blk)
			if len(blk) > len(recv) {
				return truncf("%s: %d bytes for rank %d into a buffer of %d", a.Coll, len(blk), r, len(recv))
			}
			mem.Copy(recv, blk)
			return nil
		}, false)
	case "gather", "gatherv":
		b.rooted(func() error {
			b.me.dst, b.me.counts, b.me.displs, b.me.blk = a.Recv, a.Counts, a.Displs, a.Blk
			return nil
		}, func() error {
			if a.InPlace {
				return nil
			}
			blk := blockOf(a.Recv, a.Counts, a.Displs, a.Sz, r, a.Blk)
			if len(a.Send) > len(blk) {
				return truncf("%s: %d bytes from the root into a block of %d", a.Coll, len(a.Send), len(blk))
			}
			mem.Copy(blk, a.Send)
			return nil
		}, func(root *member) error {
			blk := blockOf(root.dst, root.counts, root.displs, a.Sz, r, root.blk)
			if len(a.Send) > len(blk) {
				return truncf("%s: %d bytes from rank %d into a block of %d", a.Coll, len(a.Send), r, len(blk))
			}
			mem.Copy(blk, a.Send)
			return nil
		}, false)
	case "allreduce", "reduce":
		b.reduction()
	case "allgather", "allgatherv":
		b.allgather()
	case "alltoall", "alltoallv":
		b.alltoall()
	case "reduce_scatter":
		b.reduceScatter()
	case "scan", "exscan":
		b.scan()
	default:
		return fmt.Errorf("%w: nbc: no shared-memory %s", ranks.ErrArg, a.Coll)
	}
	return nil
}

// rooted builds bcast, scatter and gather: the root publishes (pub), does its own part (own, if any) and waits for
// the n-1 others, who each wait for the publication and then do their part with the root's entry. Its own part
// comes after the publication, as in the blocking calls: a scatter's or gather's root's copy of its own block no
// longer holds back the others' copies, which touch other blocks (1 MiB Igather among 8 ranks on 2 cores, pure
// time: 102-117 -> 70-73 us, 3 alternated rounds; level at np=2).
// With inline, the root's pub copies what the others read into its entry (a small bcast): nothing of its own is
// read, and it finishes at once; the slot's next use waits for the readers (acquire).
func (b *shmb) rooted(pub, own func() error, part func(root *member) error, inline bool) {
	root := b.a.Root
	if b.r == root {
		var err error
		b.acquire()
		if inline {
			b.s.Do(func() error {
				err := pub()
				b.publish()
				b.sl.list.notify()
				b.finish()
				return err
			})
			return
		}
		other := -1 // another member that published as a root (an erroneous program), once seen
		b.s.Do(func() error {
			err = pub() // reported once the others are done with the root's buffer
			b.publish()
			b.sl.list.notify()
			b.otherRoot(&other)
			if own != nil {
				if e := own(); err == nil {
					err = e
				}
			}
			return nil
		})
		b.waitSoonIf(func() bool { return b.readersDone(&other) }, &b.sl.flist)
		b.s.Do(func() error {
			b.finish()
			if other >= 0 && err == nil {
				err = collectives.RootTwice(b.a.Coll, b.r, other)
			}
			return err
		})
		return
	}
	// A reader needs no acquire: the root publishes use u only after acquiring the slot for it.
	b.waitSoonIf(func() bool { return b.sl.mem[root].gen.Load() >= b.u || b.rootReads(root) }, &b.sl.list)
	b.s.Do(func() error {
		m := &b.sl.mem[root]
		var err error
		if m.gen.Load() < b.u {
			err = collectivesArg("%s: rank %d names root %d, which names another: the members disagree about the root",
				b.a.Coll, b.r, root)
		} else if m.coll != b.a.Coll {
			// An erroneous program: its members started different collectives at this point. The root's entry
			// is not laid out for this call; reading it as if it were went out of its buffers.
			err = collectives.Mismatch(b.r, b.a.Coll, root, m.coll)
		} else {
			err = part(m)
		}
		b.count()
		b.finish()
		return err
	})
}

// Two members that each take themselves for the root of a rooted use both publish, and each would wait for ever
// for readers that went to the other. Every member's publication is a store to its gen followed by loads of the
// others' (sync/atomic orders them), so of two roots at least one sees the other's gen as it publishes (otherRoot):
// it marks the use disputed and tells the roots waiting for finishes. A root's wait (readersDone) looks at each
// member's gen beside its fin (one line): a reader never publishes in a rooted use, and no member starts the
// slot's next use before this one is over, so a gen at the use is a root's. A root that found another then waits
// only until every other member has finished or published (nobody reads its buffer any more), finishes and fails
// with ErrArg, and the use is over for all: the ring stays usable, and the job goes on. Readers read the root they
// named. A reader whose root never publishes, because it takes another member for the root, is told so (below).

// Members that name each other the root (0 names 1, 1 names 0), so that none publishes, would each wait for ever for
// a root that reads too. So a reader that finds its root unpublished declares itself a reader (rootReads), and tells
// the readers waiting for publications; of two such readers at least one sees the other's declaration (each
// stores, then loads). Its wait for its root ends once the root publishes or declares itself a reader, and then it
// fails with ErrArg, counts and finishes as any reader does: the use is over for all, and the job goes on. A
// member that takes itself for the root publishes and never declares, so a reader waits for it as before.

// rootReads is a reader's look, while its root has not published, at whether the root declared itself a reader
// (member.reading). It declares this member first, once.
func (b *shmb) rootReads(root int) bool {
	if b.me.reading.Load() != b.u {
		b.me.reading.Store(b.u)
		if b.sl.list.n.Load() != 0 {
			b.sl.list.notify() // a reader that took this member for its root looks again
		}
	}
	return b.sl.mem[root].reading.Load() == b.u
}

// otherRoot looks, once this root has published, for another member that published in the use, and if it finds
// one marks the use disputed.
func (b *shmb) otherRoot(other *int) {
	for j := range b.sl.mem {
		if j != b.r && b.sl.mem[j].gen.Load() >= b.u {
			b.dispute(j, other)
			return
		}
	}
}

// dispute records that member j published in this root's use too, marks the use disputed and tells the roots
// waiting for finishes.
func (b *shmb) dispute(j int, other *int) {
	*other = j
	b.sl.disputed.Store(b.u)
	b.sl.flist.notify()
}

// readersDone is a root's wait for the others' finishes: every member but this one has finished the use (or the
// use was tiny and is over for all), or, once another root is known (*other), finished or published.
func (b *shmb) readersDone(other *int) bool {
	if *other < 0 {
		if b.sl.tdone.Load() >= b.u {
			return true
		}
		for ; b.fseen < len(b.sl.mem); b.fseen++ {
			if b.fseen == b.r {
				continue
			}
			// The fin is read before the gen: a root stores its gen before its fin, so a member seen finished
			// shows its gen too if it published. Read the other way, a root that published and finished between
			// the two loads passed for a reader (TestRootsDisagreeInSlots, scatter np=2, 1 run in 50).
			m := &b.sl.mem[b.fseen]
			fin := m.fin.Load()
			if m.gen.Load() >= b.u {
				b.dispute(b.fseen, other)
				return b.readersDone(other)
			}
			if fin < b.u {
				return false
			}
		}
		return true
	}
	for j := range b.sl.mem {
		if m := &b.sl.mem[j]; j != b.r && m.gen.Load() < b.u && m.fin.Load() < b.u {
			return false
		}
	}
	return true
}

// share returns the byte range [lo, hi) of a reduction of total bytes (elements of sz) that member i combines:
// chunks of at least minChunk, shared among the members from member first on.
func share(total, sz, n, i, first int) (lo, hi int) {
	parts := min(n, max(1, total/minChunk))
	p := (i - first + n) % n
	if p >= parts {
		return 0, 0
	}
	lo, hi = span(total, sz, parts, p)
	return lo, hi
}

// combine computes, for bytes [lo, hi) of the members' published srcs, src[0] op ... op src[n-1] (rank order),
// block by block through b.acc, and writes each block at its offset less base into every buffer of dsts.
func (b *shmb) combine(k func(inout, in []byte), lo, hi, sz int, dsts [][]byte, base int) {
	bs := max((4<<10)/sz, 1) * sz
	n := b.n
	for x := lo; x < hi; x += bs {
		y := min(x+bs, hi)
		t := b.acc[:y-x]
		mem.Copy(t, b.sl.mem[n-1].src[x:y])
		for i := n - 2; i >= 0; i-- {
			k(t, b.sl.mem[i].src[x:y])
		}
		for _, d := range dsts {
			mem.Copy(d[x-base:y-base], t)
		}
	}
}

func (b *shmb) checkSrcs(what string, total int) error {
	for j := range b.sl.mem {
		if l := len(b.sl.mem[j].src); l != total {
			return collectivesArg("%s: rank %d contributes %d bytes, rank %d %d", what, b.r, total, j, l)
		}
	}
	return nil
}

func collectivesArg(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ranks.ErrArg}, args...)...)
}

// reduction builds allreduce and reduce.
func (b *shmb) reduction() {
	a, r, n := b.a, b.r, b.n
	all := a.Coll == "allreduce"
	total := len(a.Send)
	k := a.Kernel
	sz := a.Sz
	if total <= inlineMax {
		b.acquire()
		b.s.Do(func() error {
			b.me.inlen = int32(mem.Copy(b.me.inline[:], a.Send))
			b.arrive()
			if !all && r != a.Root {
				b.finish() // its contribution is in the slot: nothing of its own is read any more
			}
			return nil
		})
		if !all && r != a.Root {
			return
		}
		b.waitArrived()
		b.s.Do(func() error {
			defer b.finish()
			if err := b.sameColl(); err != nil {
				return err
			}
			out := a.Recv[:total]
			for i := n - 1; i >= 0; i-- {
				m := &b.sl.mem[i]
				in := m.inline[:m.inlen]
				switch {
				case len(in) != total:
					return collectivesArg("%s: rank %d contributes %d bytes, rank %d %d", a.Coll, r, total, i, len(in))
				case i == n-1:
					mem.Copy(out, in)
				default:
					k(out, in)
				}
			}
			return nil
		})
		return
	}
	b.acc = make([]byte, max((4<<10)/sz, 1)*sz)
	b.dsts = make([][]byte, 0, n)
	b.acquire()
	b.s.Do(func() error {
		b.me.src, b.me.dst, b.me.root = a.Send, a.Recv, int32(a.Root)
		b.arrive()
		return nil
	})
	b.waitArrived()
	first := 0
	if !all {
		first = a.Root
	}
	b.s.Do(func() error {
		defer b.finish()
		if err := b.sameColl(); err != nil {
			return err
		}
		if !all {
			if err := b.sameRoot(); err != nil {
				return err
			}
		}
		if err := b.checkSrcs(a.Coll, total); err != nil {
			return err
		}
		if all {
			for j := range b.sl.mem {
				if len(b.sl.mem[j].dst) < total {
					return truncf("%s: %d bytes into rank %d's buffer of %d", a.Coll, total, j, len(b.sl.mem[j].dst))
				}
			}
		} else if len(b.sl.mem[a.Root].dst) < total {
			return truncf("reduce: %d bytes into a root buffer of %d", total, len(b.sl.mem[a.Root].dst))
		}
		lo, hi := share(total, sz, n, r, first)
		if hi <= lo {
			return nil
		}
		dsts := b.dsts[:0]
		if !all {
			dsts = append(dsts, b.sl.mem[a.Root].dst)
		} else {
			for j := 0; j < n; j++ { // this member's first: its own buffer is the nearest
				dsts = append(dsts, b.sl.mem[(r+j)%n].dst)
			}
		}
		b.combine(k, lo, hi, sz, dsts, 0)
		clear(dsts) // the peers' buffers are not this operation's to keep
		return nil
	})
	b.waitFinished(true)
}

// allgather builds allgather and allgatherv.
func (b *shmb) allgather() {
	a, r, n := b.a, b.r, b.n
	sz := a.Sz
	src := a.Send
	if a.InPlace {
		src = blockOf(a.Recv, a.Counts, a.Displs, sz, r, a.Blk)
	}
	if a.Counts == nil && a.Blk <= inlineMax {
		b.acquire()
		b.s.Do(func() error {
			b.me.inlen = int32(mem.Copy(b.me.inline[:], src))
			b.arrive()
			return nil
		})
		b.waitArrived()
		b.s.Do(func() error {
			defer b.finish()
			if err := b.sameColl(); err != nil {
				return err
			}
			var err error
			for j := 0; j < n; j++ {
				if j == r && a.InPlace {
					continue
				}
				m := &b.sl.mem[j]
				blk := blockOf(a.Recv, nil, nil, sz, j, a.Blk)
				if int(m.inlen) > len(blk) {
					err = truncf("allgather: %d bytes from rank %d into a block of %d", m.inlen, j, len(blk))
					continue
				}
				mem.Copy(blk, m.inline[:m.inlen])
			}
			return err
		})
		return
	}
	b.acquire()
	b.s.Do(func() error {
		b.me.src = src
		b.arrive()
		return nil
	})
	b.waitArrived()
	b.s.Do(func() error {
		defer b.finish()
		if err := b.sameColl(); err != nil {
			return err
		}
		var err error
		for x := 1; x <= n; x++ {
			j := (r + x) % n // the next rank first: spreads the readers over the sources
			if j == r && a.InPlace {
				continue
			}
			blk := blockOf(a.Recv, a.Counts, a.Displs, sz, j, a.Blk)
			s := b.sl.mem[j].src
			if len(s) > len(blk) {
				err = truncf("%s: %d bytes from rank %d into a block of %d", a.Coll, len(s), j, len(blk))
				continue
			}
			mem.Copy(blk, s)
		}
		return err
	})
	b.waitFinished(true)
}

// claimMax is the most members for which alltoall takes its blocks by claims (n² words per slot); above it, each
// member pulls its own blocks once every member has published.
const claimMax = 64

// alltoall builds alltoall and alltoallv as the blocking one works (collectives/shm.go): every member publishes its
// send and receive buffers; then, for each peer that has published, it copies the block the peer sends it and the
// block it sends the peer, unless another member has claimed that copy first (a claim per block and slot, stamped
// with the use); and it is done once every block into its receive buffer and out of its send buffer has been
// copied, by whomever. So the members that come first do the copies of those that are not running (more ranks than
// cores), and none waits for all to arrive before copying. Unlike the blocking one, a member copies its own block
// after the copies with the members already there, not before: a member that came later and copied its own block
// first left both copies of each pair to the member that was already waiting. In the blocking one the members come
// at about the same time, and the order made no difference there.
func (b *shmb) alltoall() {
	a, n := b.a, b.n
	if a.Counts == nil && a.RCounts == nil && n*a.Blk <= inlineMax {
		b.alltoallInline()
		return
	}
	src := a.Send
	if a.InPlace {
		b.own = make([]byte, len(a.Recv)) // the blocks to send, copied when the operation starts
		src = b.own
		b.s.Copy(b.own, a.Recv)
	}
	if n > claimMax || b.spinSoon {
		// Where the members spin on each other's arrivals and finishes (spinSoon), each pulling its own blocks
		// beside the others beat splitting the pairs' copies by claims: 2 ranks, one process interleaving the two
		// forms, 3 alternated runs: 16 KiB blocks 1.72-1.86 -> 1.46-1.52x Alltoall, 64 KiB 1.27-1.29 -> 1.14-1.18x.
		b.alltoallPull(src)
		return
	}
	b.done = make([]bool, n)
	b.acquire()
	b.s.Do(func() error {
		b.sl.claimsOnce.Do(func() { b.sl.claims = make([]atomic.Uint64, n*n) })
		b.me.src, b.me.counts, b.me.displs, b.me.blk = src, a.Counts, a.Displs, a.Blk
		b.me.dst, b.me.rcounts, b.me.rdispls = a.Recv, a.RCounts, a.RDispls
		clear(b.done)
		b.err = nil
		// Nobody counts into them now: the slot's previous use is over (acquire), and a member finishes only
		// once its counters are complete, so every copy of that use was counted before; the next copies come
		// after the publication.
		b.me.recvDone.Store(0)
		b.me.sendDone.Store(0)
		b.publish()
		b.sl.list.notify()
		// The copies with the members already here first (pulls before pushes), this member's own block last: a
		// member that was waiting takes the other block of each pair meanwhile, so the copies of a pair are split
		// between its two members instead of all going to whoever waited (Ialltoall of 1 MiB blocks, 2 ranks:
		// 78.6 -> 71.2 us, 5 alternated pairs).
		b.moveAll()
		b.move(b.r, b.r)
		b.done[b.r] = true
		return nil
	})
	b.s.Wait(b.moveAll, &b.sl.list)
	b.s.Wait(func() bool {
		return b.me.recvDone.Load() >= uint64(b.n) && b.me.sendDone.Load() >= uint64(b.n)
	}, &b.sl.flist)
	b.s.Do(func() error { b.finish(); return b.err })
}

// moveAll moves the blocks between this member and every peer that has published, and reports whether it has done
// so with all of them (the alltoall's wait condition: it does the work it waits for).
func (b *shmb) moveAll() bool {
	all := true
	for k := 1; k < b.n; k++ {
		j := (b.r + k) % b.n // the next rank first: spreads the copies over the buffers
		if b.done[j] {
			continue
		}
		if b.sl.mem[j].gen.Load() < b.u {
			all = false
			continue
		}
		b.move(j, b.r)
		b.move(b.r, j)
		b.done[j] = true
	}
	return all
}

// move copies block i->j if this member claims it first (both have published this use), and counts it at both
// ends, in error too, so that nobody waits for it.
func (b *shmb) move(i, j int) {
	c := &b.sl.claims[i*b.n+j]
	for {
		cur := c.Load()
		if cur >= b.u {
			return // taken by another member
		}
		if c.CompareAndSwap(cur, b.u) {
			break
		}
	}
	from, to := &b.sl.mem[i], &b.sl.mem[j]
	sz := b.a.Sz
	var err error
	switch {
	case from.coll != b.a.Coll:
		err = collectives.Mismatch(b.r, b.a.Coll, i, from.coll)
	case to.coll != b.a.Coll:
		err = collectives.Mismatch(b.r, b.a.Coll, j, to.coll)
	case from.counts == nil && len(from.src) < b.n*from.blk:
		err = collectivesArg("alltoall: rank %d sends %d bytes, not %d blocks of %d", i, len(from.src), b.n, from.blk)
	case to.rcounts == nil && len(to.dst) < b.n*to.blk:
		err = truncf("alltoall: rank %d receives into %d bytes, not %d blocks of %d", j, len(to.dst), b.n, to.blk)
	default:
		s := blockOf(from.src, from.counts, from.displs, sz, j, from.blk)
		d := blockOf(to.dst, to.rcounts, to.rdispls, sz, i, to.blk)
		if len(s) > len(d) {
			err = truncf("%s: %d bytes from rank %d into a block of %d at rank %d", b.a.Coll, len(s), i, len(d), j)
		} else {
			mem.Copy(d, s)
		}
	}
	if err != nil && b.err == nil {
		b.err = err
	}
	if to.recvDone.Add(1) == uint64(b.n) {
		b.sl.flist.notify()
	}
	if from.sendDone.Add(1) == uint64(b.n) {
		b.sl.flist.notify()
	}
}

// alltoallInline is a small alltoall (all its blocks fit in a member's entry): every member copies its blocks into
// its entry as it publishes, and takes its own from every peer's entry once all have published, as a small
// allgather does. Nobody reads anybody's buffers, so there is nothing to claim or count: one line or a few per
// peer instead of the claims' and counters' round trips. In place, the entry is the snapshot of the blocks to send.
func (b *shmb) alltoallInline() {
	a, r, n := b.a, b.r, b.n
	src := a.Send
	if a.InPlace {
		src = a.Recv
	}
	b.acquire()
	b.s.Do(func() error {
		b.me.inlen = int32(mem.Copy(b.me.inline[:min(n*a.Blk, inlineMax)], src))
		b.me.blk = a.Blk
		b.arrive()
		return nil
	})
	b.waitArrived()
	b.s.Do(func() error {
		defer b.finish()
		if len(a.Recv) < n*a.Blk {
			return truncf("alltoall: rank %d receives into %d bytes, not %d blocks of %d", r, len(a.Recv), n, a.Blk)
		}
		var err error
		for x := 0; x < n; x++ {
			j := (r + x) % n
			m := &b.sl.mem[j]
			if m.coll != a.Coll {
				err = collectives.Mismatch(r, a.Coll, j, m.coll)
				continue
			}
			if int(m.inlen) < n*m.blk {
				err = collectivesArg("alltoall: rank %d sends %d bytes, not %d blocks of %d", j, m.inlen, n, m.blk)
				continue
			}
			d := blockOf(a.Recv, nil, nil, a.Sz, j, a.Blk)
			if m.blk > len(d) {
				err = truncf("alltoall: %d bytes from rank %d into a block of %d at rank %d", m.blk, j, len(d), r)
				continue
			}
			mem.Copy(d, m.inline[r*m.blk:(r+1)*m.blk])
		}
		return err
	})
}

// alltoallPull: every member pulls its blocks from the others' published sends, once all have published.
func (b *shmb) alltoallPull(src []byte) {
	a, r, n := b.a, b.r, b.n
	sz := a.Sz
	b.acquire()
	b.s.Do(func() error {
		b.me.src, b.me.counts, b.me.displs, b.me.blk = src, a.Counts, a.Displs, a.Blk
		b.arrive()
		return nil
	})
	b.waitArrived()
	b.s.Do(func() error {
		defer b.finish()
		var err error
		for x := 0; x < n; x++ {
			j := (r + x) % n
			m := &b.sl.mem[j]
			if m.coll != a.Coll {
				err = collectives.Mismatch(r, a.Coll, j, m.coll)
				continue
			}
			if m.counts == nil && len(m.src) < n*m.blk {
				err = collectivesArg("alltoall: rank %d sends %d bytes, not %d blocks of %d", j, len(m.src), n, m.blk)
				continue
			}
			s := blockOf(m.src, m.counts, m.displs, sz, r, m.blk)
			d := blockOf(a.Recv, a.RCounts, a.RDispls, sz, j, a.Blk)
			if len(s) > len(d) {
				err = truncf("%s: %d bytes from rank %d into a block of %d", a.Coll, len(s), j, len(d))
				continue
			}
			mem.Copy(d, s)
		}
		return err
	})
	b.waitFinished(true)
}

// reduceScatter: every member combines its own block from everybody's published vector. In place the vector is
// the member's receive buffer, which others read until all are done: the block waits in b.out until then.
func (b *shmb) reduceScatter() {
	a, r := b.a, b.r
	sz := a.Sz
	lo := 0
	for j := 0; j < r; j++ {
		lo += a.Counts[j] * sz
	}
	hi := lo + a.Counts[r]*sz
	total := len(a.Send)
	b.acc = make([]byte, max((4<<10)/sz, 1)*sz)
	out := a.Recv[:hi-lo]
	if a.InPlace {
		b.out = make([]byte, hi-lo)
		out = b.out
	}
	b.dsts = [][]byte{out}
	b.acquire()
	b.s.Do(func() error {
		b.me.src = a.Send
		b.arrive()
		return nil
	})
	b.waitArrived()
	b.s.Do(func() error {
		defer b.finish()
		if err := b.sameColl(); err != nil {
			return err
		}
		if err := b.checkSrcs("reduce_scatter", total); err != nil {
			return err
		}
		if hi > lo {
			b.combine(a.Kernel, lo, hi, sz, b.dsts[:1], lo)
		}
		return nil
	})
	b.waitFinished(true)
	if a.InPlace {
		b.s.Copy(a.Recv[:hi-lo], b.out)
	}
}

// scan builds scan and exscan: a chain, each member combining its predecessor's published prefix with its own
// contribution straight from the predecessor's memory.
func (b *shmb) scan() {
	a, r, n := b.a, b.r, b.n
	exclusive := a.Coll == "exscan"
	total := len(a.Send)
	src := a.Send
	if exclusive && a.InPlace {
		b.own = make([]byte, total)
		src = b.own
		b.s.Copy(b.own, a.Send)
	}
	dst := a.Recv[:total]
	var pref []byte // what this member publishes: its inclusive prefix
	if exclusive && r > 0 && r < n-1 {
		pref = make([]byte, total)
	}
	b.acquire()
	if !exclusive {
		b.s.Copy(dst, src)
	}
	if r > 0 {
		b.waitGen(r - 1)
	}
	prev := func() ([]byte, error) {
		if c := b.sl.mem[r-1].coll; c != a.Coll {
			return nil, collectives.Mismatch(r, a.Coll, r-1, c)
		}
		p := b.sl.mem[r-1].dst
		if len(p) != total {
			return nil, collectivesArg("%s: rank %d contributes %d bytes, rank %d %d", a.Coll, r, total, r-1, len(p))
		}
		return p, nil
	}
	b.s.Do(func() error {
		var err error
		mine := dst
		switch {
		case !exclusive && r > 0:
			var p []byte
			if p, err = prev(); err == nil {
				a.Kernel(dst, p)
			}
		case exclusive && r == 0:
			mine = src
		case exclusive:
			var p []byte
			if p, err = prev(); err == nil {
				mem.Copy(dst, p)
				if pref != nil {
					mem.Copy(pref, src)
					a.Kernel(pref, dst)
				}
			}
			mine = pref
		}
		if r < n-1 {
			b.me.dst = mine
			b.publish()
			b.sl.list.notify()
		} else {
			b.count()
		}
		b.finish()
		return err
	})
	b.waitFinished(false) // a chain: the members after this one may not have arrived
}

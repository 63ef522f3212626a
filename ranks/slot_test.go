package ranks

import (
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gompj/gompj/queues"
)

// TestSlotStress drives the lock-free slot from every side at once: several goroutines per rank post blocking and
// nonblocking receives (so requests come from the spare, the rank's pool and the heap, and are slotted, claimed,
// recycled and slotted again), while several goroutines on every rank send to random ranks (standard and
// synchronous, some messages large enough for rendezvous). Every message must arrive exactly once, at the right
// rank, with its status, and in order per (sender stream, receiver). It runs twice: with a bound on unexpected
// messages that holds everything the test sends, which no send crosses, and with a bound of 2 KiB per rank, which
// sends cross all the time (see Rank.reserve). (With the default bound, 256 KiB, a loaded box let the unexpected
// queue outgrow it: blocking sends crossed, and the test deadlocked as MPI allows for a program that relies on
// buffering; four copies of the test at once did so within 400 runs.)
func TestSlotStress(t *testing.T) {
	for _, share := range []int64{roomyShare, 2 << 10} {
		t.Run(fmt.Sprint("share=", share), func(t *testing.T) { slotStress(t, share) })
	}
}

// roomyShare is a bound on unexpected data that TestSlotStress never reaches: a few thousand small messages.
const roomyShare = 1 << 30

func slotStress(t *testing.T, share int64) {
	const np, streams, perDest = 4, 3, 150
	msgs := perDest
	if testing.Short() {
		msgs = 60
	}
	w, err := NewWorld(Options{Size: np, Lo: 0, Hi: np, EagerLimit: 64 << 10, Policy: queues.DefaultPolicy(np),
		UnexpectedShare: share})
	if err != nil {
		t.Fatal(err)
	}
	var crossed atomic.Int64
	err = spmd(w, func(c *Comm) error {
		me := c.Rank()
		var wg sync.WaitGroup
		errs := make(chan error, 2*streams)
		for g := 0; g < streams; g++ {
			// Sender stream g sends msgs messages with tag g to every rank, in a random interleaving.
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				rng := rand.New(rand.NewSource(int64(me*100 + g)))
				var reqs []*Request
				left := make([]int, np)
				for d := range left {
					left[d] = msgs
				}
				for sent := 0; sent < np*msgs; sent++ {
					d := rng.Intn(np)
					for left[d] == 0 {
						d = (d + 1) % np
					}
					seq := msgs - left[d]
					left[d]--
					n := 3 + rng.Intn(8)
					if rng.Intn(40) == 0 {
						n = 20000 // over the eager limit: rendezvous
					}
					b := make([]int64, n)
					b[0], b[1], b[2] = int64(me), int64(g), int64(seq)
					// Only small standard sends block here, and only under the roomy bound (then they never wait
					// for the receiver): receivers pick specific sources, so a sender blocked on one rank could
					// otherwise deadlock the test, as MPI allows for a program that relies on buffering.
					var err error
					var r *Request
					switch {
					case rng.Intn(4) == 0:
						r, err = c.Issend(b, d, g)
					case n > 100 || rng.Intn(2) == 0 || share < roomyShare:
						r, err = c.Isend(b, d, g)
						if err == nil && n <= 100 && !r.s.done.Done() {
							crossed.Add(1) // a small standard send waits: it found its receiver over the bound
						}
					default:
						err = c.Send(b, d, g)
					}
					if r != nil {
						reqs = append(reqs, r)
					}
					if err != nil {
						errs <- err
						return
					}
				}
				if err := Waitall(reqs...); err != nil {
					errs <- err
				}
			}(g)
			// Receiver k takes tag k from every source: blocking or not, wildcard source or a chosen one.
			wg.Add(1)
			go func(k int) {
				defer wg.Done()
				rng := rand.New(rand.NewSource(int64(me*100 + 50 + k)))
				next := make([]int64, np)
				for got := 0; got < np*msgs; got++ {
					b := make([]int64, 20000)
					src := AnySource
					if rng.Intn(3) == 0 {
						// A specific source that still has messages for this tag.
						src = rng.Intn(np)
						for next[src] == int64(msgs) {
							src = (src + 1) % np
						}
					}
					var st Status
					var err error
					switch rng.Intn(3) {
					case 0:
						var r *Request
						if r, err = c.Irecv(b, src, k); err == nil {
							st, err = r.Wait()
						}
					default:
						st, err = c.Recv(b, src, k)
					}
					if err != nil {
						errs <- err
						return
					}
					s, g, seq := b[0], b[1], b[2]
					switch {
					case st.Source != int(s) || st.Tag != k || int(g) != k:
						err = fmt.Errorf("rank %d receiver %d: status %d/%d for a message of stream %d/%d", me, k,
							st.Source, st.Tag, s, g)
					case src != AnySource && int(s) != src:
						err = fmt.Errorf("rank %d: receive from %d got a message from %d", me, src, s)
					case seq != next[s]:
						err = fmt.Errorf("rank %d receiver %d: from %d message %d, expected %d", me, k, s, seq,
							next[s])
					case st.Count() < 3:
						err = fmt.Errorf("rank %d: count %d", me, st.Count())
					}
					if err != nil {
						errs <- err
						return
					}
					next[s]++
				}
			}(g)
		}
		wg.Wait()
		close(errs)
		return <-errs
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d small standard sends found their receiver over its bound", crossed.Load())
	if share < roomyShare && crossed.Load() == 0 {
		t.Fatalf("with a bound of %d bytes, no small send ever found its receiver over it", share)
	}
}

// A sender that read the slot before the receive was claimed, recycled and slotted again (same request, new
// envelope) must fail its claim, whatever envelope it read.
func TestSlotStaleClaim(t *testing.T) {
	w := world(t, 2)
	c := w.Comm(1)
	r := c.r
	recv := func(src, tag int) *request {
		rr := r.getReq(kindRecv)
		rr.setMem(Mem{Type: TypeInt64})
		c.postRecv(rr, src, tag)
		return rr
	}
	rr := recv(0, 7)
	stale, g, env := r.peekSlot()
	if stale != rr || env.Src != 0 || env.Tag != 7 {
		t.Fatalf("slot holds %p %+v, want the posted receive %p from 0 tag 7", stale, env, rr)
	}
	// Another sender claims and completes it; the waiter recycles it and posts a receive with another envelope.
	if got := r.claimSlot(queues.Envelope{Src: 0, Tag: 7}); got != rr {
		t.Fatal("the matching claim failed")
	}
	rr.fill(queues.Envelope{Src: 0, Tag: 7}, Mem{Type: TypeInt64}, nil)
	rr.done.Complete()
	r.putReq(rr)
	again := recv(0, 9)
	if again != rr {
		t.Fatal("the blocking-call request was not reused; the test needs the same pointer")
	}
	if stale.claim.CompareAndSwap(g, g+1) {
		t.Fatal("a claim through a stale read succeeded")
	}
	if got := r.claimSlot(queues.Envelope{Src: 0, Tag: 7}); got != nil {
		t.Fatal("a message for tag 7 claimed a receive for tag 9")
	}
	if got := r.claimSlot(queues.Envelope{Src: 0, Tag: 9}); got != rr {
		t.Fatal("the new receive could not be claimed")
	}
	// Claimed, the slot is free again; a second receive posted meanwhile went to the queue, in order.
	second := recv(AnySource, AnyTag)
	if s, _, _ := r.peekSlot(); s != second {
		t.Fatal("a receive posted after the claim was not slotted")
	}
	third := recv(0, 1)
	if s, _, _ := r.peekSlot(); s != second || r.posted.Len() != 1 {
		t.Fatalf("the slot must keep the earliest receive and queue the next (queued: %d)", r.posted.Len())
	}
	r.mu.Lock()
	got := r.takePosted(queues.Envelope{Src: 0, Tag: 1})
	r.mu.Unlock()
	if got != second {
		t.Fatal("matching order: the earlier wildcard receive must be taken first")
	}
	r.mu.Lock()
	got = r.takePosted(queues.Envelope{Src: 0, Tag: 1})
	r.mu.Unlock()
	if got != third {
		t.Fatal("the queued receive was not found")
	}
}

// Requests never move between ranks: one recycled by a rank is never handed to another (a sender may still hold
// a stale pointer to it from the first rank's slot).
func TestRequestsStayWithTheirRank(t *testing.T) {
	w := world(t, 2)
	a, b := w.Comm(0).r, w.Comm(1).r
	var mine []*request
	for range 8 {
		mine = append(mine, a.getReq(kindRecv))
	}
	for _, r := range mine {
		a.putReq(r)
	}
	seen := make(map[*request]bool)
	for _, r := range mine {
		seen[r] = true
	}
	for range 64 {
		if r := b.getReq(kindRecv); seen[r] {
			t.Fatal("rank 1 got a request rank 0 recycled")
		}
	}
}

package nbc

import (
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/internal/hang"
	"github.com/gompj/gompj/node"
	"github.com/gompj/gompj/ranks"
)

// tinyCase is one tiny call of the model test: its start on a rank, and the check of its result against the
// reference, after its Wait.
type tinyCase struct {
	name  string
	start func() (*ranks.Request, error)
	check func() error
}

// tinyVal is rank r's element i of call k: small integers, so that sums are exact in any order.
func tinyVal(r, i, k int) float64 { return float64((r*5+i*3+k)%11 + 1) }

// newTinyCase makes call k of the sequence on rank me of c, of kind kind, with m elements per block.
func newTinyCase(c *ranks.Comm, kind, k, m, root int) tinyCase {
	me, np := c.Rank(), c.Size()
	mine := func(n int) []float64 {
		s := make([]float64, n)
		for i := range s {
			s[i] = tinyVal(me, i, k)
		}
		return s
	}
	sum := func(i, lo, hi int) float64 { // the sum of element i over ranks [lo, hi)
		t := 0.0
		for r := lo; r < hi; r++ {
			t += tinyVal(r, i, k)
		}
		return t
	}
	expect := func(got []float64, want func(i int) float64) error {
		for i := range got {
			if got[i] != want(i) {
				return fmt.Errorf("call %d: rank %d: element %d is %v, want %v", k, me, i, got[i], want(i))
			}
		}
		return nil
	}
	send, recv := mine(m), make([]float64, m)
	switch kind {
	case 0:
		return tinyCase{"allreduce", func() (*ranks.Request, error) { return Iallreduce(c, send, recv, collectives.Sum) },
			func() error { return expect(recv, func(i int) float64 { return sum(i, 0, np) }) }}
	case 1:
		buf := send
		if me != root {
			buf = make([]float64, m)
		}
		return tinyCase{"bcast", func() (*ranks.Request, error) { return Ibcast(c, buf, root) },
			func() error { return expect(buf, func(i int) float64 { return tinyVal(root, i, k) }) }}
	case 2:
		return tinyCase{"reduce", func() (*ranks.Request, error) { return Ireduce(c, send, recv, collectives.Sum, root) },
			func() error {
				if me != root {
					return nil
				}
				return expect(recv, func(i int) float64 { return sum(i, 0, np) })
			}}
	case 3:
		return tinyCase{"scan", func() (*ranks.Request, error) { return Iscan(c, send, recv, collectives.Sum) },
			func() error { return expect(recv, func(i int) float64 { return sum(i, 0, me+1) }) }}
	case 4:
		return tinyCase{"exscan", func() (*ranks.Request, error) { return Iexscan(c, send, recv, collectives.Sum) },
			func() error {
				if me == 0 {
					return nil
				}
				return expect(recv, func(i int) float64 { return sum(i, 0, me) })
			}}
	case 5:
		all := make([]float64, m*np)
		return tinyCase{"allgather", func() (*ranks.Request, error) { return Iallgather(c, send, all) },
			func() error { return expect(all, func(i int) float64 { return tinyVal(i/m, i%m, k) }) }}
	case 6:
		all := make([]float64, m*np)
		return tinyCase{"gather", func() (*ranks.Request, error) { return Igather(c, send, all, root) },
			func() error {
				if me != root {
					return nil
				}
				return expect(all, func(i int) float64 { return tinyVal(i/m, i%m, k) })
			}}
	case 7:
		out, in := mine(m*np), make([]float64, m*np)
		return tinyCase{"alltoall", func() (*ranks.Request, error) { return Ialltoall(c, out, in) },
			// block j of rank me's receive buffer is block me of rank j's send buffer
			func() error { return expect(in, func(i int) float64 { return tinyVal(i/m, me*m+i%m, k) }) }}
	case 8:
		var all []float64
		if me == root {
			all = make([]float64, m*np)
			for i := range all {
				all[i] = tinyVal(root, i, k)
			}
		}
		return tinyCase{"scatter", func() (*ranks.Request, error) { return Iscatter(c, all, recv, root) },
			// block me of the root's send buffer
			func() error { return expect(recv, func(i int) float64 { return tinyVal(root, me*m+i, k) }) }}
	case 9:
		// counts that differ by rank and by call (some 0), the same on every rank
		counts, off, total := make([]int, np), 0, 0
		for r := range counts {
			counts[r] = (r + k) % 3
			if r < me {
				off += counts[r]
			}
			total += counts[r]
		}
		vec, blk := mine(total), make([]float64, counts[me])
		return tinyCase{"reduce_scatter", func() (*ranks.Request, error) {
			return IreduceScatter(c, vec, blk, counts, collectives.Sum)
		}, func() error { return expect(blk, func(i int) float64 { return sum(off+i, 0, np) }) }}
	case 11: // in place: the contribution in the receive buffer, which a direct runner must not overwrite early
		buf := mine(m)
		return tinyCase{"allreduce in place", func() (*ranks.Request, error) {
			return Iallreduce(c, collectives.InPlace, buf, collectives.Sum)
		}, func() error { return expect(buf, func(i int) float64 { return sum(i, 0, np) }) }}
	case 12:
		all := make([]float64, m*np)
		copy(all[me*m:], send)
		return tinyCase{"allgather in place", func() (*ranks.Request, error) {
			return Iallgather(c, collectives.InPlace, all)
		}, func() error { return expect(all, func(i int) float64 { return tinyVal(i/m, i%m, k) }) }}
	case 13:
		in, buf := any(send), recv
		if me == root {
			in, buf = collectives.InPlace, mine(m)
		}
		return tinyCase{"reduce in place", func() (*ranks.Request, error) {
			return Ireduce(c, in, buf, collectives.Sum, root)
		}, func() error {
			if me != root {
				return nil
			}
			return expect(buf, func(i int) float64 { return sum(i, 0, np) })
		}}
	case 14:
		buf := mine(m * np)
		return tinyCase{"alltoall in place", func() (*ranks.Request, error) {
			return Ialltoall(c, collectives.InPlace, buf)
		}, func() error { return expect(buf, func(i int) float64 { return tinyVal(i/m, me*m+i%m, k) }) }}
	case 15:
		buf := mine(m)
		return tinyCase{"scan in place", func() (*ranks.Request, error) {
			return Iscan(c, collectives.InPlace, buf, collectives.Sum)
		}, func() error { return expect(buf, func(i int) float64 { return sum(i, 0, me+1) }) }}
	case 16:
		buf := mine(m)
		return tinyCase{"exscan in place", func() (*ranks.Request, error) {
			return Iexscan(c, collectives.InPlace, buf, collectives.Sum)
		}, func() error {
			if me == 0 {
				return nil
			}
			return expect(buf, func(i int) float64 { return sum(i, 0, me) })
		}}
	default:
		return tinyCase{"barrier", func() (*ranks.Request, error) { return Ibarrier(c) }, func() error { return nil }}
	}
}

// TestTinyModel: random sequences of tiny calls (the same on every rank), many under way at once on a ring of 2
// slots, so that starts find their slot in use and arrive late (startLate); a third of them past an entry, direct
// (directOK) or shared-memory schedules beside the tiny calls, some in place; rank 0 starts each batch before the
// others start any, and every rank waits for its requests in an order of its own. Every result is checked against
// a reference computed from the inputs. With the worker pool and without it, and with a bcast's or scatter's root
// going on at once (early: a processor for every rank) or waiting for its readers.
func TestTinyModel(t *testing.T) {
	const np, batches = 4, 30
	for _, mode := range []struct{ async, spare bool }{{true, false}, {false, false}, {true, true}, {false, true}} {
		async := mode.async
		t.Run(fmt.Sprintf("async=%v,spare=%v", async, mode.spare), func(t *testing.T) {
			defer setSpare(mode.spare)()
			gates := make([]chan struct{}, batches)
			for i := range gates {
				gates[i] = make(chan struct{})
			}
			err := node.Run(node.Config{Ranks: np, NbcSlots: 2, NoAsyncProgress: !async}, func(c *ranks.Comm) error {
				seq := rand.New(rand.NewSource(7))                   // the calls: the same on every rank
				mix := rand.New(rand.NewSource(int64(c.Rank() + 1))) // the order of the waits: each rank's own
				k, opened := 0, 0
				if c.Rank() == 0 {
					defer func() { // a failing rank 0 must not leave the others waiting at a gate: the test would hang
						for _, g := range gates[opened:] {
							close(g)
						}
					}()
				}
				for b := 0; b < batches; b++ {
					cases := make([]tinyCase, 1+seq.Intn(7))
					for i := range cases {
						m := 1 + seq.Intn(3)
						if seq.Intn(3) == 0 { // past an entry: direct (directOK), or a shared-memory schedule
							m = 31 + seq.Intn(100)
						}
						cases[i] = newTinyCase(c, seq.Intn(17), k, m, seq.Intn(np))
						k++
					}
					if c.Rank() != 0 {
						<-gates[b] // rank 0 has started the whole batch: its later starts found their slot in use
					}
					reqs := make([]*ranks.Request, len(cases))
					for i, tc := range cases {
						r, err := tc.start()
						if err != nil {
							return fmt.Errorf("%s: %w", tc.name, err)
						}
						reqs[i] = r
					}
					if c.Rank() == 0 {
						close(gates[b])
						opened++
					}
					for _, i := range mix.Perm(len(cases)) {
						if _, err := reqs[i].Wait(); err != nil {
							return fmt.Errorf("%s: %w", cases[i].name, err)
						}
						if err := cases[i].check(); err != nil {
							return fmt.Errorf("%s: %w", cases[i].name, err)
						}
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestTinyStraddle: an erroneous program whose members' sizes fall either side of the tiny limit (one member's call
// is tiny, another's is not) meets in one slot all the same: nobody hangs, the tiny member fails with a collective
// mismatch (unless its part was over at its start: a bcast's root), the others with the error their schedule
// finds, and the communicator goes on working.
func TestTinyStraddle(t *testing.T) {
	for _, tc := range []struct {
		name  string
		big   int // elements past directOK's limit for the call
		start func(c *ranks.Comm, n int) (*ranks.Request, error)
	}{
		{"allreduce", 2 * directMax / 8, func(c *ranks.Comm, n int) (*ranks.Request, error) {
			return Iallreduce(c, make([]float64, n), make([]float64, n), collectives.Sum)
		}},
		{"bcast", 2 * directCopyMax / 8, func(c *ranks.Comm, n int) (*ranks.Request, error) {
			return Ibcast(c, make([]float64, n), 0)
		}},
		{"scan", directMax / 8, func(c *ranks.Comm, n int) (*ranks.Request, error) {
			return Iscan(c, make([]float64, n), make([]float64, n), collectives.Sum)
		}},
	} {
		big := tc.big
		for tiny := 0; tiny < 2; tiny++ { // the rank whose call is tiny
			err := node.Run(node.Config{Ranks: 2}, func(c *ranks.Comm) error {
				n := big
				if c.Rank() == tiny {
					n = 1
				}
				r, err := tc.start(c, n)
				if err != nil {
					return err
				}
				_, err = r.Wait()
				// A tiny bcast's root completes at its start (early), as a shared-memory one does: its reader,
				// with a larger buffer, takes what the root sent.
				rootDone := tc.name == "bcast" && c.Rank() == 0
				if c.Rank() == tiny && !rootDone &&
					(!errors.Is(err, ranks.ErrArg) || !strings.Contains(err.Error(), "mismatch")) {
					return fmt.Errorf("%s: the tiny member (rank %d): %v", tc.name, tiny, err)
				}
				// and the communicator still works
				s, o := []float64{1}, []float64{0}
				r, err = Iallreduce(c, s, o, collectives.Sum)
				if err != nil {
					return err
				}
				if _, err := r.Wait(); err != nil {
					return err
				}
				if o[0] != 2 {
					return fmt.Errorf("after the mismatch, a sum of 2 ones is %v", o[0])
				}
				return nil
			})
			if err != nil {
				t.Errorf("%s, rank %d tiny: %v", tc.name, tiny, err)
			}
		}
	}
}

// TestTinyBcastMismatch: a bcast's root serves the members that arrived before it, and must not take another
// collective's member for a reader: an Iallreduce's member beside an Ibcast's root fails with a collective mismatch
// whichever arrives first, and its request completes once. Many rounds, so that both orders come up.
func TestTinyBcastMismatch(t *testing.T) {
	err := node.Run(node.Config{Ranks: 2}, func(c *ranks.Comm) error {
		for i := 0; i < 300; i++ {
			var r *ranks.Request
			var err error
			if c.Rank() == 0 {
				r, err = Ibcast(c, []float64{1}, 0)
			} else {
				r, err = Iallreduce(c, []float64{1}, []float64{0}, collectives.Sum)
			}
			if err != nil {
				return err
			}
			_, err = r.Wait()
			if c.Rank() == 1 && (!errors.Is(err, ranks.ErrArg) || !strings.Contains(err.Error(), "mismatch")) {
				return fmt.Errorf("round %d: the allreduce's member: %v", i, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTinyReduceScatterCounts: members of a tiny reduce_scatter whose counts differ (the same total, so the same
// entry sizes) all fail with ErrArg naming the counts, and the communicator goes on working.
func TestTinyReduceScatterCounts(t *testing.T) {
	err := node.Run(node.Config{Ranks: 3}, func(c *ranks.Comm) error {
		counts := []int{1, 1, 1}
		if c.Rank() != 0 {
			counts = []int{3, 0, 0}
		}
		r, err := IreduceScatter(c, []float64{1, 2, 3}, make([]float64, 3), counts, collectives.Sum)
		if err != nil {
			return err
		}
		if _, err := r.Wait(); !errors.Is(err, ranks.ErrArg) || !strings.Contains(err.Error(), "counts") {
			return fmt.Errorf("rank %d: %v, want ErrArg naming the counts", c.Rank(), err)
		}
		got := []float64{0}
		r, err = Iallreduce(c, []float64{1}, got, collectives.Sum)
		if err != nil {
			return err
		}
		if _, err := r.Wait(); err != nil || got[0] != 3 {
			return fmt.Errorf("rank %d: the next call: %v, %v", c.Rank(), got, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// setSpare makes every ring made from now on say spare (see early), and returns what puts the test back.
func setSpare(spare bool) func() {
	old := spareProcs
	spareProcs = func(*ranks.Comm) bool { return spare }
	return func() { spareProcs = old }
}

// TestTinyRootsDisagree: ranks 0 and 1 of a tiny bcast or scatter each name themselves root (the others name 0).
// A root that waits for its readers learns it from its Wait (ErrArg), and the job goes on; roots that went on at
// once (early: a processor for every rank) cannot be told, and unless a reader served by the wrong root was (np=3,
// when rank 2 arrives before rank 1), the job ends naming the disagreement, as it does for the blocking calls.
func TestTinyRootsDisagree(t *testing.T) {
	for _, coll := range []string{"bcast", "scatter"} {
		for _, np := range []int{2, 3} {
			for _, spare := range []bool{false, true} {
				name := fmt.Sprintf("%s np=%d spare=%v", coll, np, spare)
				restore := setSpare(spare)
				var told atomic.Int32
				err := node.Run(node.Config{Ranks: np}, func(c *ranks.Comm) error {
					root := min(c.Rank(), 1)
					if c.Rank() > 1 {
						root = 0
					}
					buf, all := []float64{float64(c.Rank())}, make([]float64, np)
					var r *ranks.Request
					var err error
					if coll == "bcast" {
						r, err = Ibcast(c, buf, root)
					} else {
						r, err = Iscatter(c, all, buf, root)
					}
					if err != nil {
						return err
					}
					_, err = r.Wait()
					switch {
					case err == nil:
					case errors.Is(err, ranks.ErrArg) && strings.Contains(err.Error(), "root"):
						told.Add(1)
					default:
						return fmt.Errorf("rank %d: %v", c.Rank(), err)
					}
					return collectives.Barrier(c) // the job goes on, or ends
				})
				restore()
				var re *ranks.RankError
				ended := errors.As(err, &re) && errors.Is(err, ranks.ErrArg) &&
					strings.Contains(err.Error(), "disagree about the root")
				switch {
				case spare && !ended && (err != nil || told.Load() == 0):
					t.Errorf("%s: the job returned %v and no rank was told, want it ended by ErrArg naming the "+
						"disagreement", name, err)
				case !spare && (err != nil || told.Load() < 2):
					t.Errorf("%s: the job returned %v and %d ranks were told, want both roots told", name, err,
						told.Load())
				}
			}
		}
	}
}

// TestRootsDisagreeInSlots: above the tiny size, members that each take themselves for the root of an Ibcast,
// Iscatter or Igather (ranks 0 and 1; the others name 0) both published and each waited for ever for readers that
// went to the other. Each root now sees the other's publication (otherRoot, readersDone) and fails with ErrArg
// once nobody reads its buffer; the readers of rank 0 get its data. Those of an Ireduce each had their members'
// shares combined into their buffers, and returned part of the sum without an error; now every member fails
// (sameRoot). Either way the use is over for all, so the job goes on and the next call on the communicator works.
// With and without the worker pool.
func TestRootsDisagreeInSlots(t *testing.T) {
	const n = 32768 // float64s: 256 KiB, above the tiny calls' sizes, direct ones included (directCopyMax)
	for _, coll := range []string{"bcast", "scatter", "gather", "reduce"} {
		for _, np := range []int{2, 3, 5} {
			for _, async := range []bool{true, false} {
				name := fmt.Sprintf("%s np=%d async=%v", coll, np, async)
				wantTold := int32(2)
				if coll == "reduce" {
					wantTold = int32(np)
				}
				var told atomic.Int32
				err := hang.Within(t, name, time.Minute, func() error {
					return node.Run(node.Config{Ranks: np, NoAsyncProgress: !async}, func(c *ranks.Comm) error {
						me := c.Rank()
						root := 0
						if me == 1 {
							root = 1
						}
						buf, all := make([]float64, n), make([]float64, n*np)
						for i := range buf {
							buf[i] = float64(me + 1)
						}
						for i := range all {
							all[i] = float64(me + 1)
						}
						r, err := startRooted(c, coll, buf, all, root)
						if err != nil {
							return err
						}
						_, err = r.Wait()
						switch {
						case (me <= 1 || coll == "reduce") && errors.Is(err, ranks.ErrArg) &&
							strings.Contains(err.Error(), "disagree about the root"):
							told.Add(1)
						case me <= 1 || coll == "reduce":
							return fmt.Errorf("root %d: %v, want ErrArg naming the disagreement", me, err)
						case err != nil:
							return fmt.Errorf("rank %d, a reader of rank 0: %v", me, err)
						case coll != "gather" && buf[0] != 1:
							return fmt.Errorf("rank %d, a reader of rank 0: got %v, want rank 0's 1", me, buf[0])
						}
						return nextIbcastWorks(c)
					})
				})
				if err != nil || told.Load() != wantTold {
					t.Errorf("%s: the job returned %v and %d ranks were told, want %d told and the job on",
						name, err, told.Load(), wantTold)
				}
			}
		}
	}
}

// TestRootsSwappedInSlots: above the tiny size, members that name each other the root of an Ibcast, Iscatter or
// Igather (rank 0 names 1, rank 1 names 0, the others 0), so that none publishes, each waited for ever. Each now
// sees that the member it names declared itself a reader (rootReads) and fails with ErrArg, and so do the others;
// the use is over for all, and the next call on the communicator works. At 8 B (tiny) a bcast's or scatter's runner
// tells them.
// With and without the worker pool.
func TestRootsSwappedInSlots(t *testing.T) {
	for _, n := range []int{1, 32768} { // float64s: tiny, and 256 KiB, above the tiny calls' sizes (directCopyMax)
		for _, coll := range []string{"bcast", "scatter", "gather"} {
			if coll == "gather" && n == 1 {
				continue // a tiny gather's non-roots complete at their start: the runner ends the job (tinyEnd)
			}
			for _, np := range []int{2, 3, 5} {
				for _, async := range []bool{true, false} {
					name := fmt.Sprintf("%s n=%d np=%d async=%v", coll, n, np, async)
					var told atomic.Int32
					err := hang.Within(t, name, time.Minute, func() error {
						return node.Run(node.Config{Ranks: np, NoAsyncProgress: !async}, func(c *ranks.Comm) error {
							me := c.Rank()
							root := 0
							if me == 0 {
								root = 1
							}
							r, err := startRooted(c, coll, make([]float64, n), make([]float64, n*np), root)
							if err != nil {
								return err
							}
							if _, err = r.Wait(); !errors.Is(err, ranks.ErrArg) ||
								!strings.Contains(err.Error(), "disagree about the root") {
								return fmt.Errorf("rank %d: %v, want ErrArg naming the disagreement", me, err)
							}
							told.Add(1)
							return nextIbcastWorks(c)
						})
					})
					if err != nil || told.Load() != int32(np) {
						t.Errorf("%s: the job returned %v and %d ranks were told, want all %d and the job on",
							name, err, told.Load(), np)
					}
				}
			}
		}
	}
}

// nextIbcastWorks checks that the job goes on after an erroneous call: the communicator's next call works.
func nextIbcastWorks(c *ranks.Comm) error {
	x := []float64{float64(c.Rank())}
	r, err := Ibcast(c, x, 0)
	if err == nil {
		_, err = r.Wait()
	}
	if err == nil && x[0] != 0 {
		err = fmt.Errorf("rank %d: the next Ibcast gave %v", c.Rank(), x[0])
	}
	return err
}

// startRooted starts coll (bcast, scatter, reduce or gather) from root on c, with buf as the member's own block and
// all as the root's whole (a reduce's result: its first len(buf)).
func startRooted(c *ranks.Comm, coll string, buf, all []float64, root int) (*ranks.Request, error) {
	switch coll {
	case "bcast":
		return Ibcast(c, buf, root)
	case "scatter":
		return Iscatter(c, all, buf, root)
	case "reduce":
		return Ireduce(c, buf, all[:len(buf)], collectives.Sum, root)
	}
	return Igather(c, buf, all, root)
}

// TestTinySubLastArrival: a node-aware op's tiny phase whose member arrives last runs the use in its arrival without
// a request of its own (bySelf), and learns its outcome there: the sum and no error when the members agree; the
// mismatch when they do not (an allreduce against a barrier), as the other member's request says too; and when the
// other member is early (a reduce's, root 1, against rank 1's allreduce), the runner is the only one told, and the
// job goes on all the same. Each rank's op is that one phase; rank 0 arrives first, rank 1 once rank 0 has counted
// itself, and rank 1's run finishes rank 0's op too (the inline hook).
func TestTinySubLastArrival(t *testing.T) {
	for _, other := range []string{"allreduce", "barrier", "early"} {
		first := make(chan struct{})
		err := node.Run(node.Config{Ranks: 2}, func(c *ranks.Comm) error {
			me := c.Rank()
			send, recv := []float64{float64(me + 1)}, make([]float64, 1)
			a, err := collectives.ResolveAllreduce(c, send, recv, collectives.Sum)
			switch {
			case other == "barrier" && me == 1:
				a, err = collectives.ResolveBarrier(c)
			case other == "early" && me == 0:
				a, err = collectives.ResolveReduce(c, send, recv, collectives.Sum, 1)
			}
			if err != nil {
				return err
			}
			o := newOp(c)
			ts := &tinySub{o: o, c: c, a: &a}
			ts.sl, ts.u = slotFor(c, cacheOf(c))
			s := &Schedule{}
			s.Run(ts)
			o.m = Machine{s: s}
			o.m.Reset()
			o.tr = newTransport(o, c, len(s.Steps))
			o.setReq(c.OpRequest(o))
			ranks.Launch(o.req)
			if me == 1 {
				<-first
			}
			o.run()
			if me == 0 {
				close(first)
			} else if !o.done.Load() || ts.reqDone != nil {
				return fmt.Errorf("rank 1 arrived last: op done %v, with a request %v", o.done.Load(), ts.reqDone != nil)
			}
			_, err = o.req.Wait()
			switch {
			case other == "allreduce" && (err != nil || recv[0] != 3):
				return fmt.Errorf("rank %d: %v, %v", me, recv, err)
			case other == "early" && me == 0:
				return err // early: done at its arrival, and told nothing
			case other != "allreduce" && (!errors.Is(err, ranks.ErrArg) || !strings.Contains(err.Error(), "mismatch")):
				return fmt.Errorf("rank %d: %v, want ErrArg naming the mismatch", me, err)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("against %s: %v", other, err)
		}
	}
}

// TestGatherPush: a direct gather's member that arrives once the root has published pushes its block into the
// root's buffer and is done at its start; one that arrives before leaves its block to the use's runner. Rank 1
// starts after the root, rank 2 before it (sequenced by channels); a chain's arrival (no request: op.chainAgain)
// pushes too. Every block lands, and the next gather on the slot finds it free.
func TestGatherPush(t *testing.T) {
	const m = 64 // float64s a block: past an entry
	early, rootIn := make(chan struct{}), make(chan struct{})
	err := node.Run(node.Config{Ranks: 4}, func(c *ranks.Comm) error {
		me, np := c.Rank(), c.Size()
		send, all := make([]float64, m), make([]float64, m*np)
		for i := range send {
			send[i] = float64(me*1000 + i)
		}
		switch me {
		case 0:
			<-early // rank 2 has arrived before the root
		case 1:
			<-rootIn
		case 3: // a chain's arrival, without a request, once the root is in
			<-rootIn
			a, err := collectives.ResolveGather(c, send, nil, 0)
			if err != nil {
				return err
			}
			sl, u := slotFor(c, cacheOf(c))
			collectives.NextOp(c)
			if err := tinyArrive(c, sl, u, me, np, &a, ranks.Target{}, byColl); err != nil {
				return err
			}
			if sl.mem[me].served.Load() != uint32(u) {
				return fmt.Errorf("rank 3 did not push its block")
			}
			return nil
		}
		r, err := Igather(c, send, all, 0)
		if err != nil {
			return err
		}
		switch me {
		case 0:
			close(rootIn)
		case 1:
			if _, done, err := r.Test(); !done || err != nil {
				return fmt.Errorf("rank 1, after the root: not done at its start (%v, %v)", done, err)
			}
		case 2:
			close(early)
		}
		if _, err := r.Wait(); err != nil {
			return err
		}
		if me == 0 {
			for i, x := range all {
				if want := float64(i/m*1000 + i%m); x != want {
					return fmt.Errorf("root: element %d is %v, want %v", i, x, want)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTinyReaderServesItself: a tiny bcast's or scatter's reader that arrives after its root has published serves
// itself at its arrival (serve): it gets the root's data, its request is complete when its start returns, and a
// reader that finds another collective in the root's entry fails with a collective mismatch. The root starts first
// and only then tells the readers to start.
func TestTinyReaderServesItself(t *testing.T) {
	err := node.Run(node.Config{Ranks: 3}, func(c *ranks.Comm) error {
		const root = 1
		me := c.Rank()
		for round := 0; round < 40; round++ {
			// bcast, then scatter, then a scatter whose root started a bcast
			for kind := 0; kind < 3; kind++ {
				var r *ranks.Request
				var err error
				buf := []float64{0, 0}
				blocks := []float64{10, 11, 20, 21, 30, 31}
				if me == root {
					if kind == 1 {
						r, err = Iscatter(c, blocks, buf, root)
					} else {
						buf = []float64{float64(round), 7}
						r, err = Ibcast(c, buf, root)
					}
					if err != nil {
						return err
					}
					for j := 0; j < c.Size(); j++ {
						if j != root {
							if err := c.Send([]byte{1}, j, 5); err != nil {
								return err
							}
						}
					}
					if _, err := r.Wait(); err != nil && kind != 2 {
						return err
					}
					continue
				}
				if _, err := c.Recv(make([]byte, 1), root, 5); err != nil {
					return err
				}
				if kind == 0 {
					r, err = Ibcast(c, buf, root)
				} else {
					r, err = Iscatter(c, nil, buf, root)
				}
				if err != nil {
					return err
				}
				_, done, err := r.Test()
				if !done {
					return fmt.Errorf("round %d kind %d: the reader's request is not complete at its start", round, kind)
				}
				switch kind {
				case 0:
					if err != nil || buf[0] != float64(round) || buf[1] != 7 {
						return fmt.Errorf("round %d: bcast got %v, %v", round, buf, err)
					}
				case 1:
					if err != nil || buf[0] != float64(10*(me+1)) || buf[1] != float64(10*(me+1)+1) {
						return fmt.Errorf("round %d: scatter got %v, %v", round, buf, err)
					}
				case 2:
					if !errors.Is(err, ranks.ErrArg) || !strings.Contains(err.Error(), "mismatch") {
						return fmt.Errorf("round %d: a scatter's reader beside a bcast's root: %v", round, err)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTinyLastArrivalRunsItself: the last member to arrive at a tiny call runs it in its arrival and takes no
// request for anyone to complete (startTiny, bySelf): its request is complete when its start returns, with the
// result, and with a collective mismatch (the others' too) where it started another collective.
func TestTinyLastArrivalRunsItself(t *testing.T) {
	err := node.Run(node.Config{Ranks: 3}, func(c *ranks.Comm) error {
		const last = 2
		me := c.Rank()
		for round := 0; round < 40; round++ {
			for _, odd := range []bool{false, true} {
				if me == last {
					for j := 0; j < last; j++ {
						if _, err := c.Recv(make([]byte, 1), j, 6); err != nil {
							return err
						}
					}
				}
				out := []float64{0}
				var r *ranks.Request
				var err error
				if me == last && odd {
					r, err = Iallgather(c, []float64{1}, make([]float64, 3))
				} else {
					r, err = Iallreduce(c, []float64{float64(me + round)}, out, collectives.Sum)
				}
				if err != nil {
					return err
				}
				if me != last {
					if err := c.Send([]byte{1}, last, 6); err != nil {
						return err
					}
					_, err = r.Wait()
				} else {
					var done bool
					if _, done, err = r.Test(); !done {
						return fmt.Errorf("round %d: the last member's request is not complete at its start", round)
					}
				}
				want := float64(0 + 1 + 2 + 3*round)
				switch {
				case odd && (!errors.Is(err, ranks.ErrArg) || !strings.Contains(err.Error(), "mismatch")):
					return fmt.Errorf("round %d: rank %d beside another collective: %v", round, me, err)
				case !odd && (err != nil || out[0] != want):
					return fmt.Errorf("round %d: rank %d: allreduce got %v, %v; want %v", round, me, out[0], err, want)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

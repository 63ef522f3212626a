package gompj_test

import (
	"fmt"
	"slices"
	"testing"

	. "github.com/gompj/gompj"
	"github.com/gompj/gompj/internal/harness"
)

// The blocking collectives with View arguments, in the three modes: each call runs once on plain slices (the
// reference, which the collectives suite checks against its own) and once on strided Views over larger slices
// holding the same elements; the views' elements must come out equal to the slices', and the elements of the
// larger slices outside the views untouched.

type viewColl struct {
	name string
	// lens gives this rank's send and receive lengths for block size m (0: no such argument)
	lens func(np, rank, m int) (send, recv int)
	run  func(c *Comm, send, recv any, m int) error
}

func vcounts(np, m int) (counts, displs []int, total int) {
	for r := range np {
		counts = append(counts, m+r%3)
		displs = append(displs, total+1) // a gap before each block
		total += m + r%3 + 1
	}
	return counts, displs, total + 1
}

func viewColls() []viewColl {
	sq := func(np, rank, m int) (int, int) { return m, m }
	return []viewColl{
		{"bcast", func(np, rank, m int) (int, int) { return 0, m }, func(c *Comm, _, recv any, m int) error { return c.Bcast(recv, 1%c.Size()) }},
		{"reduce", sq, func(c *Comm, s, r any, m int) error { return c.Reduce(s, r, Sum, c.Size()-1) }},
		{"allreduce", sq, func(c *Comm, s, r any, m int) error { return c.Allreduce(s, r, Sum) }},
		{"allreduce/inplace", func(np, rank, m int) (int, int) { return 0, m }, func(c *Comm, _, r any, m int) error { return c.Allreduce(InPlace, r, Sum) }},
		{"gather", func(np, rank, m int) (int, int) { return m, np * m }, func(c *Comm, s, r any, m int) error { return c.Gather(s, r, 0) }},
		{"gatherv", func(np, rank, m int) (int, int) { _, _, t := vcounts(np, m); return m + rank%3, t }, func(c *Comm, s, r any, m int) error {
			counts, displs, _ := vcounts(c.Size(), m)
			return c.Gatherv(s, r, counts, displs, 0)
		}},
		{"scatter", func(np, rank, m int) (int, int) { return np * m, m }, func(c *Comm, s, r any, m int) error { return c.Scatter(s, r, 0) }},
		{"scatterv", func(np, rank, m int) (int, int) { _, _, t := vcounts(np, m); return t, m + rank%3 }, func(c *Comm, s, r any, m int) error {
			counts, displs, _ := vcounts(c.Size(), m)
			return c.Scatterv(s, counts, displs, r, 0)
		}},
		{"allgather", func(np, rank, m int) (int, int) { return m, np * m }, func(c *Comm, s, r any, m int) error { return c.Allgather(s, r) }},
		{"allgatherv", func(np, rank, m int) (int, int) { _, _, t := vcounts(np, m); return m + rank%3, t }, func(c *Comm, s, r any, m int) error {
			counts, displs, _ := vcounts(c.Size(), m)
			return c.Allgatherv(s, r, counts, displs)
		}},
		{"alltoall", func(np, rank, m int) (int, int) { return np * m, np * m }, func(c *Comm, s, r any, m int) error { return c.Alltoall(s, r) }},
		{"alltoall/inplace", func(np, rank, m int) (int, int) { return 0, np * m }, func(c *Comm, _, r any, m int) error { return c.Alltoall(InPlace, r) }},
		{"alltoallv", func(np, rank, m int) (int, int) { _, _, t := vcounts(np, m); return np * m, t }, func(c *Comm, s, r any, m int) error {
			np := c.Size()
			sc := make([]int, np)
			for j := range sc {
				sc[j] = m
			}
			rc, rd, _ := vcounts(np, m)
			for j := range rc {
				rc[j] = m // what j sends me
			}
			return c.Alltoallv(s, sc, nil, r, rc, rd)
		}},
		{"reduce_scatter", func(np, rank, m int) (int, int) { return np * m, m }, func(c *Comm, s, r any, m int) error {
			counts := make([]int, c.Size())
			for i := range counts {
				counts[i] = m
			}
			return c.ReduceScatter(s, r, counts, Sum)
		}},
		{"reduce_scatter_block", func(np, rank, m int) (int, int) { return np * m, m }, func(c *Comm, s, r any, m int) error { return c.ReduceScatterBlock(s, r, Sum) }},
		{"scan", sq, func(c *Comm, s, r any, m int) error { return c.Scan(s, r, Sum) }},
		{"exscan", sq, func(c *Comm, s, r any, m int) error { return c.Exscan(s, r, Sum) }},
		{"scan/inplace", func(np, rank, m int) (int, int) { return 0, m }, func(c *Comm, _, r any, m int) error { return c.Scan(InPlace, r, Sum) }},
	}
}

// viewCollCase runs one collective both ways for element type T.
func viewCollCase[T comparable](c *Comm, vc viewColl, m int, conv func(int) T) error {
	np, me := c.Size(), c.Rank()
	sl, rl := vc.lens(np, me, m)
	sentinel := conv(-3)
	mk := func(n, seed int) []T {
		s := make([]T, n)
		for i := range s {
			s[i] = conv((seed*7919 + i*31) % 97)
		}
		return s
	}
	// reference: plain slices
	var send any
	if sl > 0 {
		send = mk(sl, me)
	}
	recv := mk(rl, 1000+me) // receive buffers start with data too: in place, and what the call leaves alone
	ref := slices.Clone(recv)
	if err := vc.run(c, send, ref, m); err != nil {
		return fmt.Errorf("on slices: %w", err)
	}
	// views over every third element of larger slices
	var vsend any
	if sl > 0 {
		v, back, at := strided3(sl, sentinel)
		for i, x := range mk(sl, me) {
			back[at(i)] = x
		}
		vsend = v
	}
	rv, rback, rat := strided3(rl, sentinel)
	for i, x := range recv {
		rback[rat(i)] = x
	}
	if err := vc.run(c, vsend, rv, m); err != nil {
		return fmt.Errorf("on views: %w", err)
	}
	for i := range rback {
		if i%3 != 1 && rback[i] != sentinel {
			return fmt.Errorf("rank %d: slice element %d outside the receive view was written", me, i)
		}
	}
	for i, x := range ref {
		if got := rback[rat(i)]; got != x {
			return fmt.Errorf("rank %d: view element %d is %v, on slices %v", me, i, got, x)
		}
	}
	return nil
}

// strided3 is a View of n elements over every third element (from index 1) of a fresh slice filled with fill.
func strided3[T any](n int, fill T) (*View, []T, func(int) int) {
	back := make([]T, 3*n+2)
	for i := range back {
		back[i] = fill
	}
	v, err := Vector(back[1:], n, 1, 3)
	if err != nil {
		panic(err)
	}
	return v, back, func(i int) int { return 1 + 3*i }
}

func TestModesCollectiveViews(t *testing.T) {
	harness.Run(t, 5, func(c *Comm) error {
		sizes := []int{1, 7, (64<<10)/8 + 5} // the last above every collective switch and the eager limits
		if raceEnabled {
			sizes = sizes[:2]
		}
		for _, vc := range viewColls() {
			for _, m := range sizes {
				errs := []error{
					viewCollCase(c, vc, m, func(i int) float64 { return float64(i) * 0.5 }),
					viewCollCase(c, vc, m, func(i int) int32 { return int32(i) }),
				}
				if m < 100 {
					errs = append(errs,
						viewCollCase(c, vc, m, func(i int) complex128 { return complex(float64(i), 1) }),
						viewCollCase(c, vc, m, func(i int) uint8 { return uint8(i) }))
				}
				for _, err := range errs {
					if err != nil {
						return fmt.Errorf("%s m=%d: %w", vc.name, m, err)
					}
				}
			}
		}
		// A nil *View is ErrBuffer, and the communicator goes on.
		var nv *View
		if err := c.Allreduce(nv, make([]float64, 1), Sum); err == nil {
			return fmt.Errorf("Allreduce of a nil *View succeeded")
		}
		return c.Barrier()
	})
}

// TestModesNonblockingCollectiveViews: nonblocking and persistent collectives take Views as the blocking ones do
// (packed copies owned by the operation, unpacked before the request completes); each result is compared with the
// blocking call's on slices, and persistent runs are repeated with new data.
func TestModesNonblockingCollectiveViews(t *testing.T) {
	type nb struct {
		name string
		lens func(np, rank, m int) (int, int)
		blk  func(c *Comm, s, r any, m int) error
		nb   func(c *Comm, s, r any, m int, persistent bool) (*Request, error)
	}
	sq := func(np, rank, m int) (int, int) { return m, m }
	colls := []nb{
		{"allreduce", sq, func(c *Comm, s, r any, m int) error { return c.Allreduce(s, r, Sum) },
			func(c *Comm, s, r any, m int, p bool) (*Request, error) {
				if p {
					return c.AllreduceInit(s, r, Sum)
				}
				return c.Iallreduce(s, r, Sum)
			}},
		{"bcast", func(np, rank, m int) (int, int) { return 0, m }, func(c *Comm, _, r any, m int) error { return c.Bcast(r, 1%c.Size()) },
			func(c *Comm, _, r any, m int, p bool) (*Request, error) {
				if p {
					return c.BcastInit(r, 1%c.Size())
				}
				return c.Ibcast(r, 1%c.Size())
			}},
		{"gatherv", func(np, rank, m int) (int, int) { _, _, t := vcounts(np, m); return m + rank%3, t },
			func(c *Comm, s, r any, m int) error {
				counts, displs, _ := vcounts(c.Size(), m)
				return c.Gatherv(s, r, counts, displs, 0)
			},
			func(c *Comm, s, r any, m int, p bool) (*Request, error) {
				counts, displs, _ := vcounts(c.Size(), m)
				if p {
					return c.GathervInit(s, r, counts, displs, 0)
				}
				return c.Igatherv(s, r, counts, displs, 0)
			}},
		{"alltoall/inplace", func(np, rank, m int) (int, int) { return 0, np * m }, func(c *Comm, _, r any, m int) error { return c.Alltoall(InPlace, r) },
			func(c *Comm, _, r any, m int, p bool) (*Request, error) {
				if p {
					return c.AlltoallInit(InPlace, r)
				}
				return c.Ialltoall(InPlace, r)
			}},
		{"exscan", sq, func(c *Comm, s, r any, m int) error { return c.Exscan(s, r, Sum) },
			func(c *Comm, s, r any, m int, p bool) (*Request, error) {
				if p {
					return c.ExscanInit(s, r, Sum)
				}
				return c.Iexscan(s, r, Sum)
			}},
	}
	harness.Run(t, 4, func(c *Comm) error {
		np, me := c.Size(), c.Rank()
		for _, vc := range colls {
			for _, m := range []int{3, 9000} {
				for _, persistent := range []bool{false, true} {
					sl, rl := vc.lens(np, me, m)
					runs := 1
					if persistent {
						runs = 3
					}
					var req *Request
					sv, sback, sat := strided3(sl, -3.0)
					rv, rback, rat := strided3(rl, -3.0)
					for run := range runs {
						seed := 100*run + m
						send := make([]float64, sl)
						recv := make([]float64, rl)
						for i := range send {
							send[i] = float64((me*31+i+seed)%97) * 0.5
							sback[sat(i)] = send[i]
						}
						for i := range recv {
							recv[i] = float64((me*7+i+seed)%89) * 0.25
							rback[rat(i)] = recv[i]
						}
						var sarg any
						if sl > 0 {
							sarg = sv
						}
						if req == nil || !persistent {
							var err error
							if req, err = vc.nb(c, sarg, rv, m, persistent); err != nil {
								return fmt.Errorf("%s m=%d persistent %v: %w", vc.name, m, persistent, err)
							}
						}
						if persistent {
							if err := req.Start(); err != nil {
								return err
							}
						}
						var ssl any
						if sl > 0 {
							ssl = send
						}
						if err := vc.blk(c, ssl, recv, m); err != nil { // the reference, meanwhile
							return err
						}
						if _, err := req.Wait(); err != nil {
							return fmt.Errorf("%s m=%d persistent %v run %d: %w", vc.name, m, persistent, run, err)
						}
						for i, x := range recv {
							if got := rback[rat(i)]; got != x {
								return fmt.Errorf("%s m=%d persistent %v run %d: view element %d is %v, blocking on slices %v", vc.name, m, persistent, run, i, got, x)
							}
						}
						for i := range rback {
							if i%3 != 1 && rback[i] != -3 {
								return fmt.Errorf("%s: slice element %d outside the view was written", vc.name, i)
							}
						}
					}
					if persistent {
						req.Free()
					}
				}
			}
		}
		return nil
	})
}

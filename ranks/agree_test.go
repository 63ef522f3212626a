package ranks

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// ringCheck passes a token round c with the same tag on every communicator: if two communicators of a rank shared
// a context, tokens would cross between them and carry the wrong id.
func ringCheck(c *Comm, id int64) error {
	n := c.Size()
	if n == 1 {
		return nil
	}
	tok := []int64{0, 0}
	next, prev := (c.Rank()+1)%n, (c.Rank()+n-1)%n
	if c.Rank() == 0 {
		if err := c.Send([]int64{id, 1}, next, 0); err != nil {
			return err
		}
		if _, err := c.Recv(tok, prev, 0); err != nil {
			return err
		}
		if tok[0] != id || tok[1] != int64(n) {
			return fmt.Errorf("communicator %d: the token came back as %v", id, tok)
		}
		return nil
	}
	if _, err := c.Recv(tok, prev, 0); err != nil {
		return err
	}
	if tok[0] != id {
		return fmt.Errorf("communicator %d: rank %d got the token of communicator %d", id, c.Rank(), tok[0])
	}
	tok[1]++
	return c.Send(tok, next, 0)
}

// Several goroutines of every rank create communicators at once: CreateGroup over overlapping groups (distinct
// tags), while another goroutine Dups and Splits the world. Every rank ends with communicators of distinct
// contexts, and traffic on each stays on it. Without the per-rank right to allocate (agree.go), concurrent
// agreements that read the same nextCtx pick the same context.
func TestConcurrentCommCreation(t *testing.T) {
	const np, groups, rounds = 8, 5, 4
	w := world(t, np)
	// Group j: the ranks r with (r+j)%3 != 0, in an order that depends on j.
	members := func(j int) []int32 {
		var m []int32
		for r := 0; r < np; r++ {
			if (r+j)%3 != 0 {
				m = append(m, int32((r*(j+1))%np))
			}
		}
		slices.Sort(m)
		m = slices.Compact(m)
		if j%2 == 1 {
			slices.Reverse(m)
		}
		return m
	}
	var mu sync.Mutex
	ctxs := make([][]uint32, np) // per rank, every context it was given
	err := spmd(w, func(c *Comm) error {
		var wg sync.WaitGroup
		errs := make([]error, groups+2)
		keep := func(nc *Comm) {
			mu.Lock()
			ctxs[c.Rank()] = append(ctxs[c.Rank()], nc.ctx)
			if nc.local != nil {
				ctxs[c.Rank()] = append(ctxs[c.Rank()], nc.local.ctx)
			}
			mu.Unlock()
		}
		half, err := c.Split(c.Rank()%2, 0)
		if err != nil {
			return err
		}
		keep(half)
		// Intercommunicators between the halves, their Dups and Merges, beside the rest.
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < rounds; k++ {
				ic, err := half.IntercommCreate(0, c, 1-c.Rank()%2, 3)
				var d, m *Comm
				if err == nil {
					keep(ic)
					d, err = ic.Dup()
				}
				if err == nil {
					keep(d)
					m, err = d.Merge(c.Rank()%2 == 1)
				}
				if err == nil {
					keep(m)
					err = ringCheck(m, 300)
				}
				if err != nil {
					errs[groups+1] = err
					return
				}
			}
		}()
		for j := 0; j < groups; j++ {
			m := members(j)
			if !slices.Contains(m, int32(c.Rank())) {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				g := newGroup(m, c.Rank())
				for k := 0; k < rounds; k++ {
					nc, err := c.CreateGroup(g, j)
					if err == nil && (nc.Size() != len(m) || nc.WorldRank(nc.Rank()) != c.Rank()) {
						err = fmt.Errorf("group %d: rank %d of %d is world rank %d", j, nc.Rank(), nc.Size(), nc.WorldRank(nc.Rank()))
					}
					if err == nil {
						keep(nc)
						err = ringCheck(nc, int64(j))
					}
					if err != nil {
						errs[j] = err
						return
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < rounds; k++ {
				d, err := c.Dup()
				if err == nil {
					keep(d)
					err = ringCheck(d, 100)
				}
				var s *Comm
				if err == nil {
					s, err = c.Split(c.Rank()%2, 0)
				}
				if err == nil {
					keep(s)
					err = ringCheck(s, 200+int64(c.Rank()%2))
				}
				if err != nil {
					errs[groups] = err
					return
				}
			}
		}()
		wg.Wait()
		return errors.Join(errs...)
	})
	if err != nil {
		t.Fatal(err)
	}
	for r, cs := range ctxs {
		s := slices.Clone(cs)
		slices.Sort(s)
		if len(slices.Compact(s)) != len(cs) {
			t.Fatalf("rank %d holds communicators with the same context: %v", r, cs)
		}
	}
}

// The key order decides: among the agreements present on a rank, the right goes to the smallest key only, and
// never to two at once; a finished agreement raises nextCtx past its numbers.
func TestAgreementRightOrder(t *testing.T) {
	r := &Rank{nextCtx: 5}
	lo, hi := &agreement{key: keyOf(1, 1, agreeColl, 0)}, &agreement{key: keyOf(2, 2, agreeColl, 0)}
	r.present(hi)
	if ok, _ := r.tryHold(hi); !ok {
		t.Fatal("a lone agreement did not get the right")
	}
	r.present(lo)
	if ok, _ := r.tryHold(lo); ok {
		t.Fatal("the right was given twice")
	}
	r.letGo(hi, false, 0, 0)
	if ok, _ := r.tryHold(hi); ok {
		t.Fatal("a larger key took the right while a smaller one is present")
	}
	ok, p := r.tryHold(lo)
	if !ok || p != 5 {
		t.Fatalf("the smaller key: %v, proposal %d", ok, p)
	}
	r.letGo(lo, true, 9, 2)
	if ok, p := r.tryHold(hi); !ok || p != 11 {
		t.Fatalf("after the smaller key finished with 9..10: %v, proposal %d", ok, p)
	}
}

// An agreement does not hold its rank's right while it waits for a member busy in another agreement that needs the
// right: rank 0 runs Dup and CreateGroup in two goroutines, ranks 1 and 2 run CreateGroup, then Dup. Rank 0's Dup
// (the smaller key) starts first and is waiting for ranks 1 and 2 before its CreateGroup starts. If the Dup held
// rank 0's right while waiting, the CreateGroup could never get it, ranks 1 and 2 would never reach the Dup, and
// the job would hang.
func TestAgreementWaitsWithoutTheRight(t *testing.T) {
	w := world(t, 3)
	done := make(chan error, 1)
	go func() {
		done <- spmd(w, func(c *Comm) error {
			g := newGroup([]int32{0, 1, 2}, c.Rank())
			if c.Rank() != 0 {
				cg, err := c.CreateGroup(g, 5)
				if err != nil {
					return err
				}
				d, err := c.Dup()
				return errors.Join(err, ringCheck(cg, 1), ringCheck(d, 2))
			}
			dupErr := make(chan error, 1)
			var d *Comm
			go func() {
				var err error
				d, err = c.Dup()
				dupErr <- err
			}()
			// Wait until the Dup is blocked in a receive (from a member not there yet).
			for c.r.slot.Load() == nil || c.r.slot.Load().claim.Load()&1 == 0 {
				runtime.Gosched()
			}
			cg, err := c.CreateGroup(g, 5)
			if err != nil {
				return err
			}
			if err := <-dupErr; err != nil {
				return err
			}
			return errors.Join(ringCheck(cg, 1), ringCheck(d, 2))
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		w.Abort(errors.New("hung"))
		t.Fatal("Dup and CreateGroup on rank 0 deadlocked against ranks 1 and 2")
	}
}

// IntercommCreate's leader must be in the peer communicator it passes: a peer that is another rank's is ErrComm,
// reported to the leader's whole group. Both leaders pass one here, so both groups fail and nobody waits.
func TestIntercommPeerOfAnotherRank(t *testing.T) {
	w := world(t, 4)
	err := spmd(w, func(c *Comm) error {
		half, err := c.Split(c.Rank()%2, 0)
		if err != nil {
			return err
		}
		peer := c
		if half.Rank() == 0 {
			peer = w.Comm((c.Rank() + 2) % 4) // a world communicator, but rank 2's (or 3's)
		}
		_, err = half.IntercommCreate(0, peer, 1-c.Rank()%2, 1)
		if !errors.Is(err, ErrComm) {
			return fmt.Errorf("rank %d: %v, want ErrComm", c.Rank(), err)
		}
		// The job goes on: the same call with the right peer works.
		ic, err := half.IntercommCreate(0, c, 1-c.Rank()%2, 1)
		if err != nil {
			return err
		}
		return ic.Free()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A communicator's node-shared objects outlive its first Free: a member that makes its first lookup after another
// member freed the communicator finds the same object (a neighbourhood collective lets a member finish with a
// communicator before a non-neighbour has started). They go once every member on the node has freed it.
func TestSharedOutlivesTheFirstFree(t *testing.T) {
	w := world(t, 3)
	objs := make([]any, 3)
	err := spmd(w, func(c *Comm) error {
		d, err := c.Dup()
		if err != nil {
			return err
		}
		return inTurn(c, func() error { // rank 0 looks up and frees, then rank 1, then rank 2
			objs[c.Rank()] = w.Shared(d, "k", func() any { return new(int) })
			return d.Free()
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if objs[0] != objs[1] || objs[1] != objs[2] {
		t.Fatal("a member that looked up after the first Free got another object")
	}
	if len(w.shared) != 0 || len(w.released) != 0 {
		t.Fatalf("after every member freed: %d objects, %d counts left", len(w.shared), len(w.released))
	}
}

// A shared object that its members unshare (a persistent collective's slot, when its requests are freed) stays for
// a member that looks it up after another unshared it, and goes once every member on the node has unshared it: the
// communicator, here the world's, lives on, and the next lookup makes a fresh object. Freeing a communicator drops
// its objects' counts too.
func TestUnshare(t *testing.T) {
	w := world(t, 3)
	objs := make([]any, 3)
	err := spmd(w, func(c *Comm) error {
		return inTurn(c, func() error { // rank 0 looks up and unshares, then rank 1, then rank 2
			objs[c.Rank()] = w.Shared(c, "k", func() any { return new(int) })
			w.Unshare(c, "k")
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if objs[0] != objs[1] || objs[1] != objs[2] {
		t.Fatal("a member that looked up after the first Unshare got another object")
	}
	if len(w.shared) != 0 || len(w.released) != 0 {
		t.Fatalf("after every member unshared: %d objects, %d counts left", len(w.shared), len(w.released))
	}
	err = spmd(w, func(c *Comm) error {
		d, err := c.Dup()
		if err != nil {
			return err
		}
		w.Shared(d, "k", func() any { return new(int) })
		if c.Rank() == 0 {
			w.Unshare(d, "k") // the others free d without unsharing: its count goes with d
		}
		return d.Free()
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.shared) != 0 || len(w.released) != 0 {
		t.Fatalf("after every member freed: %d objects, %d counts left", len(w.shared), len(w.released))
	}
}

// inTurn runs f on each rank of c in rank order: each waits for the one before it to finish.
func inTurn(c *Comm, f func() error) error {
	me := c.Rank()
	if me > 0 {
		if _, err := c.Recv(make([]byte, 1), me-1, 0); err != nil {
			return err
		}
	}
	if err := f(); err != nil {
		return err
	}
	if me < c.Size()-1 {
		return c.Send([]byte{1}, me+1, 0)
	}
	return nil
}

package ranks

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
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
		errs := make([]error, groups+1)
		keep := func(nc *Comm) {
			mu.Lock()
			ctxs[c.Rank()] = append(ctxs[c.Rank()], nc.ctx)
			mu.Unlock()
		}
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

// The key order decides: an agreement waiting with a smaller key keeps the right from a larger one.
func TestAgreementRightOrder(t *testing.T) {
	r := &Rank{nextCtx: 5}
	lo, hi := &agreement{key: keyOf(1, 1, agreeColl, 0)}, &agreement{key: keyOf(2, 2, agreeColl, 0)}
	if ok, _ := r.tryHold(hi); !ok {
		t.Fatal("a lone agreement did not get the right")
	}
	if ok, _ := r.tryHold(lo); ok {
		t.Fatal("the right was given twice")
	}
	r.letGo(hi, false, 0, 0)
	if ok, _ := r.tryHold(hi); ok {
		t.Fatal("a larger key took the right while a smaller one waits for it")
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

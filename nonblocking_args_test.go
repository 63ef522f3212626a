package gompj_test

import (
	"fmt"
	"testing"

	. "github.com/gompj/gompj"
)

// TestNonblockingGatherArgumentsNotBoxed: Igather and Iallgather of slices, called as most code calls them, with
// slices converted to any at the call, allocate nothing per start and wait once their operation is built: their
// parameters let only their content escape (nbc's heapObjects), as a blocking collective's do. Each slice argument
// that escaped cost one allocation (an 8-byte Iallgather on 2 ranks: 0.32 us against 0.24 for Allgather).
func TestNonblockingGatherArgumentsNotBoxed(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	err := RunWith(Config{Ranks: 2}, func(c *Comm) error {
		x, y := []float64{1, 2}, []float64{0, 0, 0, 0}
		wait := func(r *Request, err error) error {
			if err != nil {
				return err
			}
			_, err = r.Wait()
			return err
		}
		calls := []argCall{
			{"Igather", func() error { return wait(c.Igather(x, y, 0)) }},
			{"Iallgather", func() error { return wait(c.Iallgather(x, y)) }},
			{"Iallreduce", func() error { return wait(c.Iallreduce(x, y, Sum)) }},
			{"Ialltoall", func() error { return wait(c.Ialltoall(x, y)) }},
		}
		for _, k := range calls { // the operation's first build
			if err := k.call(); err != nil {
				return err
			}
		}
		return noAllocsPerCall(calls)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestNonblockingObjectsOnMovingStack: Igather and Iallgather of objects keep no pointer to what their caller may
// hold on its stack (their arguments do not escape): a receiving slice that lives in the caller's frame gets every
// member's value even when the caller's stack moves (grows) between the start and the completion. The member that
// receives starts first, grows its stack, and only then lets the others start, so that its operation receives
// after the move. Keeping the pointer to the slice left it empty (it is filled at completion, through the old
// stack), or wrote to freed stack memory.
func TestNonblockingObjectsOnMovingStack(t *testing.T) {
	mk := func(r int) objVal { return objVal{Name: fmt.Sprint("rank", r), Vals: []int{r, 2 * r}} }
	check := func(what string, got []objVal, n int) error {
		if len(got) != n {
			return fmt.Errorf("%s: %d values, want %d", what, len(got), n)
		}
		for r := range n {
			if fmt.Sprint(got[r]) != fmt.Sprint(mk(r)) {
				return fmt.Errorf("%s: value %d is %v, want %v", what, r, got[r], mk(r))
			}
		}
		return nil
	}
	err := RunWith(Config{Ranks: 3}, func(c *Comm) error {
		me, n, last := c.Rank(), c.Size(), c.Size()-1
		// Iallgather: the last rank receives last (rank 0 gathers, then broadcasts).
		var all []objVal
		if me == last {
			r, err := c.Iallgather(mk(me), &all)
			if err != nil {
				return err
			}
			if growStack(64) == 0 {
				return fmt.Errorf("growStack")
			}
			if err := c.Send([]byte{1}, 0, 7); err != nil {
				return err
			}
			if _, err := r.Wait(); err != nil {
				return err
			}
		} else {
			if me == 0 {
				if _, err := c.Recv(make([]byte, 1), last, 7); err != nil {
					return err
				}
			}
			r, err := c.Iallgather(mk(me), &all)
			if err != nil {
				return err
			}
			if _, err := r.Wait(); err != nil {
				return err
			}
		}
		if err := check(fmt.Sprintf("allgather on rank %d", me), all, n); err != nil {
			return err
		}
		// Igather to the last rank, which starts first.
		var got []objVal
		if me == last {
			r, err := c.Igather(mk(me), &got, last)
			if err != nil {
				return err
			}
			if growStack(64) == 0 {
				return fmt.Errorf("growStack")
			}
			for j := 0; j < last; j++ {
				if err := c.Send([]byte{1}, j, 8); err != nil {
					return err
				}
			}
			if _, err := r.Wait(); err != nil {
				return err
			}
			return check("gather", got, n)
		}
		if _, err := c.Recv(make([]byte, 1), last, 8); err != nil {
			return err
		}
		r, err := c.Igather(mk(me), nil, last)
		if err != nil {
			return err
		}
		_, err = r.Wait()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// growStack recurses k KiB deep in frames of 1 KiB, which makes the goroutine's stack grow (and move) unless it
// is that large already, and returns a sum the compiler cannot drop.
//
//go:noinline
func growStack(k int) int {
	var pad [1024]byte
	pad[k%len(pad)] = byte(k)
	if k == 0 {
		return int(pad[0]) + 1
	}
	return growStack(k-1) + int(pad[k%len(pad)])
}

package nbc

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/node"
	"github.com/gompj/gompj/ranks"
)

// The memo runs a repeated call with the operation that ran it last (or its resolved call, if tiny: tiny.go), and
// only the very same call: another buffer, the same memory seen shorter, a Force since, bad arguments, a freed
// communicator and a second call while the first is still under way all take the full path, with its results and
// errors. Small (tiny) and larger calls alike.
func TestMemo(t *testing.T) {
	for _, n := range []int{5, 2 * inlineMax / 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) { testMemo(t, n) })
	}
}

func testMemo(t *testing.T, n int) {
	const np = 3
	want := func(i int) float64 { return float64(np*(np-1)/2 + np*i) } // the sum of rank+i over the ranks
	err := node.Run(node.Config{Ranks: np}, func(c *ranks.Comm) error {
		send, out, other := make([]float64, n), make([]float64, n), make([]float64, n)
		run := func(i int, send, recv []float64) error {
			for j := range send {
				send[j] = float64(c.Rank() + i)
			}
			r, err := Iallreduce(c, send, recv, collectives.Sum)
			if err != nil {
				return err
			}
			if _, err := r.Wait(); err != nil {
				return err
			}
			for j := range send {
				if recv[j] != want(i) {
					return fmt.Errorf("call %d: recv[%d] = %v, want %v", i, j, recv[j], want(i))
				}
			}
			return nil
		}
		memo := func() any {
			if m := cacheOf(c).memo[kindAllreduce]; m.tiny != nil {
				return m.tiny
			} else if m.o != nil {
				return m.o
			}
			return nil
		}

		// The same call again: the memo's operation, with the new data.
		if err := run(0, send, out); err != nil {
			return err
		}
		first := memo()
		if first == nil {
			return fmt.Errorf("no memo after an Iallreduce")
		}
		for i := 1; i < 4; i++ {
			if err := run(i, send, out); err != nil {
				return err
			}
			if memo() != first {
				return fmt.Errorf("call %d: the same call did not run the memo's operation again", i)
			}
		}
		// Another receive buffer, and the same memory seen shorter: other operations, results where they belong.
		clear(out)
		if err := run(4, send, other); err != nil {
			return err
		}
		if memo() == first || out[0] != 0 {
			return fmt.Errorf("another buffer: memo %p (first %p), the old buffer holds %v", memo(), first, out[0])
		}
		if err := run(5, send[:n-2], other[:n-2]); err != nil {
			return err
		}
		if other[n-2] != want(4) {
			return fmt.Errorf("a shorter call wrote past its buffer: %v", other[3])
		}
		// Bad arguments after good ones fail as ever.
		if _, err := Iallreduce(c, send[:3], other[:2], collectives.Sum); !errors.Is(err, ranks.ErrTruncate) {
			return fmt.Errorf("a short receive buffer: %v", err)
		}
		if _, err := Iallreduce(c, send[:3], make([]int64, 3), collectives.Sum); !errors.Is(err, ranks.ErrType) {
			return fmt.Errorf("another element type: %v", err)
		}
		// A Force since the last call: the forced algorithm runs it.
		if err := run(6, send, out); err != nil {
			return err
		}
		if err := collectives.Force(c, "iallreduce", "recursive_doubling"); err != nil {
			return err
		}
		if err := run(7, send, out); err != nil {
			return err
		}
		if o, ok := memo().(*op); !ok || o.algo != "recursive_doubling" {
			return fmt.Errorf("after a Force, the call ran %v", memo())
		}
		if err := collectives.Force(c, "iallreduce", ""); err != nil {
			return err
		}
		// Two of the same barrier under way at once: the second is an operation of its own.
		for i := 0; i < 3; i++ {
			r1, err := Ibarrier(c)
			if err != nil {
				return err
			}
			r2, err := Ibarrier(c)
			if err != nil {
				return err
			}
			if r1 == r2 {
				return fmt.Errorf("two barriers under way share a request")
			}
			if err := ranks.Waitall(r2, r1); err != nil {
				return err
			}
		}
		// A freed communicator: ErrComm, though the call is the memo's.
		d, err := c.Dup()
		if err != nil {
			return err
		}
		for i := 0; i < 2; i++ {
			r, err := Iallreduce(d, send, out, collectives.Sum)
			if err != nil {
				return err
			}
			if _, err := r.Wait(); err != nil {
				return err
			}
		}
		if err := d.Free(); err != nil {
			return err
		}
		if _, err := Iallreduce(d, send, out, collectives.Sum); !errors.Is(err, ranks.ErrComm) {
			return fmt.Errorf("a freed communicator: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

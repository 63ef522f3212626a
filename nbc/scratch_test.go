package nbc

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/node"
	"github.com/gompj/gompj/ranks"
)

// TestScratch: a schedule records the pooled buffers it takes, sized as asked, and holds none after giveBack; a
// buffer too large for the pools is made and not recorded.
func TestScratch(t *testing.T) {
	var s Schedule
	a, b := s.scratch(100), s.scratch(40<<10)
	if len(a) != 100 || len(b) != 40<<10 || len(s.held) != 2 {
		t.Fatalf("two pooled buffers: len %d and %d, held %d", len(a), len(b), len(s.held))
	}
	if &(*s.held[1])[0] != &b[0] {
		t.Fatal("the holder recorded is not the buffer's")
	}
	s.giveBack()
	if len(s.held) != 0 {
		t.Fatalf("%d buffers held after giveBack", len(s.held))
	}
	if big := s.scratch(64 << 20); len(big) != 64<<20 || len(s.held) != 0 {
		t.Fatalf("a buffer beyond the pools: len %d, held %d", len(big), len(s.held))
	}
}

// TestWeakOpGivesScratchBack: a large call's op, kept weakly (cache.go), holds its pooled buffers from run to run,
// and gives them back to the pools when the collector frees it, once its requests are dropped; one whose last run
// failed does not (a child may still be under way into them).
func TestWeakOpGivesScratchBack(t *testing.T) {
	err := node.Run(node.Config{Ranks: 2}, func(c *ranks.Comm) error {
		if err := collectives.Force(c, "iallreduce", "recursive_doubling"); err != nil { // messages: a scratch half
			return err
		}
		before := scratchReturned.Load()
		err := func() error {
			send, recv := make([]float64, 1<<14), make([]float64, 1<<14) // 128 KiB: kept weakly
			for i := 0; i < 3; i++ {
				r, err := Iallreduce(c, send, recv, collectives.Sum)
				if err != nil {
					return err
				}
				if _, err := r.Wait(); err != nil {
					return err
				}
			}
			return nil
		}()
		if err != nil {
			return err
		}
		if err := collectives.Barrier(c); err != nil {
			return err
		}
		deadline := time.Now().Add(10 * time.Second)
		for scratchReturned.Load() == before {
			if time.Now().After(deadline) {
				return fmt.Errorf("rank %d: the op's pooled buffers did not come back after it was collected", c.Rank())
			}
			runtime.GC() // cleanups run on their own goroutine after a collection
			runtime.Gosched()
		}
		lb := &lentBack{boxes: []*[]byte{new([]byte)}} // a failed last run: nothing goes back
		n := scratchReturned.Load()
		lb.give()
		if scratchReturned.Load() != n {
			return fmt.Errorf("rank %d: a failed op's buffers went back to the pools", c.Rank())
		}
		return collectives.Barrier(c)
	})
	if err != nil {
		t.Fatal(err)
	}
}

package nbc

import (
	"fmt"
	"runtime"
	"testing"
	"weak"

	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/node"
	"github.com/gompj/gompj/ranks"
)

// TestFreedCommunicatorCollected: a communicator that ran nonblocking collectives, small ones (kept for reuse, in
// the communicator's state) and large ones (kept weakly), becomes garbage once every member has freed it. The
// collective state's cleanup held the state, which holds the kept operations, which hold the communicator: a
// cleanup whose argument reaches its object never runs, so every such communicator stayed alive (about 72 KB per
// Split, Iallreduce and Free). And each shared-memory operation held its predecessor on the slot, so the large ones
// chained every operation before them.
func TestFreedCommunicatorCollected(t *testing.T) {
	const np = 4
	err := node.Run(node.Config{Ranks: np}, func(c *ranks.Comm) error {
		handles, err := freedComms(c, 4)
		if err != nil {
			return err
		}
		// The rank's operation requests come in blocks of 8 (ranks.opChunk), each alive while the rank hands out
		// its requests, and each request holds its operation: start a block's worth more on c, so that the block
		// that holds those of the freed communicators' operations is nobody's.
		for i := 0; i < 8; i++ {
			r, err := Ibarrier(c)
			if err != nil {
				return err
			}
			if _, err := r.Wait(); err != nil {
				return err
			}
		}
		return collectedAfterFree(c, "communicator", handles)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// collectedAfterFree reports an error if any of this rank's handles still points at a live object once every
// member of c has freed what it made (the first barrier) and two collections have run.
func collectedAfterFree[T any](c *ranks.Comm, what string, handles []weak.Pointer[T]) error {
	if err := collectives.Barrier(c); err != nil {
		return err
	}
	runtime.GC()
	runtime.GC()
	if err := collectives.Barrier(c); err != nil {
		return err
	}
	for i, h := range handles {
		if h.Value() != nil {
			return fmt.Errorf("rank %d: %s %d is still reachable after Free", c.Rank(), what, i)
		}
	}
	return nil
}

// freedComms splits c k times, runs nonblocking collectives on each part, frees it, and returns weak handles to
// the parts (so that nothing in the caller's frame holds them).
func freedComms(c *ranks.Comm, k int) ([]weak.Pointer[ranks.Comm], error) {
	var handles []weak.Pointer[ranks.Comm]
	small, smallOut := make([]float64, 4), make([]float64, 4)
	large, largeOut := make([]float64, 16384), make([]float64, 16384) // 128 KiB: kept only weakly (cache.go)
	for i := 0; i < k; i++ {
		sc, err := c.Split(c.Rank()%2, c.Rank())
		if err != nil {
			return nil, err
		}
		starts := []func() (*ranks.Request, error){
			func() (*ranks.Request, error) { return Iallreduce(sc, small, smallOut, collectives.Sum) },
			func() (*ranks.Request, error) { return Iallreduce(sc, large, largeOut, collectives.Sum) },
			func() (*ranks.Request, error) { return Ibcast(sc, large, 0) },
			func() (*ranks.Request, error) { return Ibarrier(sc) },
		}
		for _, start := range starts {
			r, err := start()
			if err != nil {
				return nil, err
			}
			if _, err := r.Wait(); err != nil {
				return nil, err
			}
		}
		handles = append(handles, weak.Make(sc))
		if err := sc.Free(); err != nil {
			return nil, err
		}
	}
	return handles, nil
}

// TestPersistentSlotReleased: a persistent collective's own shared-memory slot (World.Shared, keyed by the
// collective) is forgotten once every member has freed its request, though the communicator, here the world's, lives
// on: each one made and freed kept its slot to the end of the job.
func TestPersistentSlotReleased(t *testing.T) {
	slotsReleased(t, persistentRun, "the slot of persistent collective")
}

// slotsReleased makes, runs and frees three persistent collectives on 3 ranks with run, and checks that the slot of
// each (what) is collected once all are freed.
func slotsReleased(t *testing.T, run func(*ranks.Comm) (weak.Pointer[slot], error), what string) {
	err := node.Run(node.Config{Ranks: 3}, func(c *ranks.Comm) error {
		var handles []weak.Pointer[slot]
		for i := 0; i < 3; i++ {
			h, err := run(c)
			if err != nil {
				return err
			}
			handles = append(handles, h)
		}
		return collectedAfterFree(c, what, handles)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// persistentRun makes a persistent allreduce on c, runs it twice, frees it, and returns a weak handle to its slot.
func persistentRun(c *ranks.Comm) (weak.Pointer[slot], error) {
	send, recv := make([]float64, 4), make([]float64, 4)
	a, err := collectives.ResolveAllreduce(c, send, recv, collectives.Sum)
	o, err := persistentOp(c, &a, err, nil)
	if err != nil {
		return weak.Pointer[slot]{}, err
	}
	if o.shm == nil {
		return weak.Pointer[slot]{}, fmt.Errorf("the allreduce of %d ranks in one process is not in shared memory", c.Size())
	}
	h := weak.Make(o.shm.sl)
	for i := 0; i < 2; i++ {
		if err := o.req.Start(); err != nil {
			return h, err
		}
		if _, err := o.req.Wait(); err != nil {
			return h, err
		}
	}
	return h, o.req.Free()
}

// TestPersistentTinySlotReleased: a small persistent collective's slot (tiny.go) is forgotten once every member has
// freed its request, also when one member frees it while its run is in flight: the member completing that run
// releases it (ranks.CompletePersistentColl).
func TestPersistentTinySlotReleased(t *testing.T) {
	slotsReleased(t, persistentTinyRun, "the slot of small persistent collective")
}

// persistentTinyRun makes a small persistent allreduce on c, runs it twice, then starts it a third time: rank 0
// frees its request at once, in flight, before the others start theirs; they wait for theirs and free them. It
// returns a weak handle to the slot.
func persistentTinyRun(c *ranks.Comm) (weak.Pointer[slot], error) {
	send, recv := make([]float64, 4), make([]float64, 4)
	a, err := collectives.ResolveAllreduce(c, send, recv, collectives.Sum)
	if err != nil {
		return weak.Pointer[slot]{}, err
	}
	rc, r := newPersistentTiny(c, &a)
	h := weak.Make(rc.sl)
	for i := 0; i < 2; i++ {
		for j := range send {
			send[j] = float64(c.Rank() + i)
		}
		if err := r.Start(); err != nil {
			return h, err
		}
		if _, err := r.Wait(); err != nil {
			return h, err
		}
		if want := float64(c.Size()*(c.Size()-1)/2 + c.Size()*i); recv[0] != want {
			return h, fmt.Errorf("run %d: %v, want %v", i, recv[0], want)
		}
	}
	if c.Rank() == 0 {
		if err := r.Start(); err != nil {
			return h, err
		}
		if err := r.Free(); err != nil {
			return h, err
		}
		return h, collectives.Barrier(c)
	}
	if err := collectives.Barrier(c); err != nil {
		return h, err
	}
	if err := r.Start(); err != nil {
		return h, err
	}
	if _, err := r.Wait(); err != nil {
		return h, err
	}
	return h, r.Free()
}

package nbc

import (
	"fmt"
	"testing"
	"weak"

	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/node"
	"github.com/gompj/gompj/ranks"
)

// A nonblocking collective too large to keep for reuse outright lets go of the program's buffers once it has
// finished and its request is dropped. Requests live on in their rank's blocks of requests (ranks.opChunk, and the
// point-to-point ones of the operation's steps) until a block's last is handed out and dropped, so an operation
// that they held kept a program's freed buffers alive until 8 more nonblocking collectives started on that rank,
// maybe never: a gigabyte Iallreduce, twice that. (Such an operation is kept weakly for reuse, cache.go: its own
// request is allocated alone, and its steps' requests reach it through a weak pointer, newOp.) The algorithms are
// the point-to-point ones, as between node processes: a shared-memory schedule's slot keeps its members' last
// buffers until the slot's next use (shm.go).
func TestOneOffOperationLetsGoOfBuffers(t *testing.T) {
	err := node.Run(node.Config{Ranks: 2}, func(c *ranks.Comm) error {
		for coll, algo := range map[string]string{"iallreduce": "recursive_doubling", "ialltoall": "pairwise", "ibcast": "binomial"} {
			if err := collectives.Force(c, coll, algo); err != nil {
				return err
			}
		}
		var handles []weak.Pointer[float64]
		starts := []func(send, recv []float64) (*ranks.Request, error){
			func(send, recv []float64) (*ranks.Request, error) { return Iallreduce(c, send, recv, collectives.Sum) },
			func(send, recv []float64) (*ranks.Request, error) { return Ialltoall(c, send, recv) },
			func(send, _ []float64) (*ranks.Request, error) { return Ibcast(c, send, 0) },
		}
		for _, start := range starts {
			h, err := func() ([]weak.Pointer[float64], error) {
				send, recv := make([]float64, 1<<15), make([]float64, 1<<15) // 256 KiB each: kept weakly (cache.go)
				r, err := start(send, recv)
				if err != nil {
					return nil, err
				}
				if _, err := r.Wait(); err != nil {
					return nil, err
				}
				return []weak.Pointer[float64]{weak.Make(&send[0]), weak.Make(&recv[0])}, nil
			}()
			if err != nil {
				return err
			}
			handles = append(handles, h...)
		}
		return collectedAfterFree(c, "buffer of a finished one-off collective", handles)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A large call's operation is kept weakly (cache.go), by the memo too (memo.go): the same call again, while the
// program holds its buffers, runs the same operation again; once the program has dropped its requests, a collection
// frees the operation.
func TestLargeOperationKeptWeakly(t *testing.T) {
	err := node.Run(node.Config{Ranks: 2}, func(c *ranks.Comm) error {
		send, recv := make([]float64, 1<<14), make([]float64, 1<<14) // 128 KiB each: kept weakly
		for i := range send {
			send[i] = float64(c.Rank() + i)
		}
		h, err := func() (weak.Pointer[op], error) { // its frame, and the requests in it, are gone after
			var none weak.Pointer[op]
			call := func() (*ranks.Request, error) {
				r, err := Iallreduce(c, send, recv, collectives.Sum)
				if err != nil {
					return nil, err
				}
				_, err = r.Wait()
				return r, err
			}
			r1, err := call()
			if err != nil {
				return none, err
			}
			var first *op
			for _, w := range cacheOf(c).big {
				if o := w.Value(); o != nil && o.req == r1 {
					first = o
				}
			}
			if first == nil {
				return none, fmt.Errorf("rank %d: the operation of a large call is not kept", c.Rank())
			}
			if m := &cacheOf(c).memo[kindAllreduce]; m.op() != first || m.o != nil {
				return none, fmt.Errorf("rank %d: the memo does not keep the large call's operation, weakly", c.Rank())
			}
			r2, err := call()
			if err != nil {
				return none, err
			}
			if first.req != r2 {
				return none, fmt.Errorf("rank %d: the same large call built a new operation", c.Rank())
			}
			return weak.Make(first), nil
		}()
		if err != nil {
			return err
		}
		for i, v := range recv {
			if want := float64(1 + 2*i); v != want {
				return fmt.Errorf("rank %d: recv[%d] = %v, want %v", c.Rank(), i, v, want)
			}
		}
		return collectedAfterFree(c, "operation of a large call, its requests dropped", []weak.Pointer[op]{h})
	})
	if err != nil {
		t.Fatal(err)
	}
}

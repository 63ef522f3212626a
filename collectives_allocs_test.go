package gompj_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	. "github.com/gompj/gompj"
)

// TestCollectiveArgumentsNotBoxed: a blocking collective called as most code calls it, with slices converted to
// any at the call, allocates nothing, as Send and Recv do: its buffer parameters let only their content escape
// (collectives' hideArg), so the compiler keeps the boxes on the caller's stack. Escape is decided at compile
// time, whatever path a call takes, so one rank shows it; before hideArg, each slice argument cost one allocation.
func TestCollectiveArgumentsNotBoxed(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	err := RunWith(Config{Ranks: 1}, func(c *Comm) error {
		x, y := []float64{1, 2}, []float64{0, 0}
		one := []int{2}
		zero := []int{0}
		calls := []argCall{
			{"Bcast", func() error { return c.Bcast(x, 0) }},
			{"Reduce", func() error { return c.Reduce(x, y, Sum, 0) }},
			{"Allreduce", func() error { return c.Allreduce(x, y, Sum) }},
			{"Gather", func() error { return c.Gather(x, y, 0) }},
			{"Gatherv", func() error { return c.Gatherv(x, y, one, zero, 0) }},
			{"Scatter", func() error { return c.Scatter(x, y, 0) }},
			{"Scatterv", func() error { return c.Scatterv(x, one, zero, y, 0) }},
			{"Allgather", func() error { return c.Allgather(x, y) }},
			{"Allgatherv", func() error { return c.Allgatherv(x, y, one, zero) }},
			{"Alltoall", func() error { return c.Alltoall(x, y) }},
			{"Alltoallv", func() error { return c.Alltoallv(x, one, zero, y, one, zero) }},
			{"ReduceScatter", func() error { return c.ReduceScatter(x, y, one, Sum) }},
			{"ReduceScatterBlock", func() error { return c.ReduceScatterBlock(x, y, Sum) }},
			{"Scan", func() error { return c.Scan(x, y, Sum) }},
			{"Exscan", func() error { return c.Exscan(x, y, Sum) }},
		}
		return noAllocsPerCall(calls)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// argCall is one call of an allocation test on arguments passed as any.
type argCall struct {
	name string
	call func() error
}

// noAllocsPerCall runs each call as testing.AllocsPerRun does and fails, naming them, if some allocated.
func noAllocsPerCall(calls []argCall) error {
	var bad []string
	for _, k := range calls {
		var err error
		allocs := testing.AllocsPerRun(100, func() {
			if e := k.call(); e != nil && err == nil {
				err = e
			}
		})
		if err != nil {
			return fmt.Errorf("%s: %w", k.name, err)
		}
		if allocs != 0 {
			bad = append(bad, fmt.Sprintf("%s %.1f", k.name, allocs))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("allocations per call with slice arguments: %s", strings.Join(bad, ", "))
	}
	return nil
}

// TestNeighborArgumentsNotBoxed is TestCollectiveArgumentsNotBoxed for the blocking neighbourhood collectives, on
// one rank whose neighbours are itself: a periodic Cartesian grid of one (two edges to itself) and a distributed
// graph with a self edge, under each algorithm (hybrid, the one-node default, copies through the shared slot; p2p
// sends itself messages). TestNeighborAllocations boxes its buffers once and counts the calls' own allocations;
// this one converts slices to any at each call, as most code does.
func TestNeighborArgumentsNotBoxed(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	err := RunWith(Config{Ranks: 1}, func(c *Comm) error {
		cart, err := c.CartCreate([]int{1}, []bool{true}, false)
		if err != nil {
			return err
		}
		graph, err := c.DistGraphCreateAdjacent([]int{0}, []int{0}, false)
		if err != nil {
			return err
		}
		var errs []error
		for _, topo := range []struct {
			name string
			g    *Comm
		}{{"cart", cart}, {"distgraph", graph}} {
			g := topo.g
			srcs, _, err := g.Neighbors()
			if err != nil {
				return err
			}
			// One or two edges each way (both topologies are symmetric): blocks of one or two elements fit.
			x, y := []float64{1, 2}, make([]float64, 4)
			ones, twos := make([]int, len(srcs)), make([]int, len(srcs))
			for i := range srcs {
				ones[i], twos[i] = 1, 2
			}
			for _, algo := range []string{"hybrid", "p2p"} {
				for _, coll := range []string{"allgather", "allgatherv", "alltoall", "alltoallv"} {
					if err := g.ForceAlgorithm("neighbor_"+coll, algo); err != nil {
						return err
					}
				}
				calls := []argCall{
					{"NeighborAllgather", func() error { return g.NeighborAllgather(x, y) }},
					{"NeighborAllgatherv", func() error { return g.NeighborAllgatherv(x, y, twos, nil) }},
					{"NeighborAlltoall", func() error { return g.NeighborAlltoall(x, y) }},
					{"NeighborAlltoallv", func() error { return g.NeighborAlltoallv(x, ones, nil, y, ones, nil) }},
				}
				if err := noAllocsPerCall(calls); err != nil {
					errs = append(errs, fmt.Errorf("%s, %s: %w", topo.name, algo, err))
				}
			}
		}
		return errors.Join(errs...)
	})
	if err != nil {
		t.Fatal(err)
	}
}

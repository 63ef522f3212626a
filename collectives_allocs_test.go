package gompj_test

import (
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
		calls := []struct {
			name string
			call func() error
		}{
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
	})
	if err != nil {
		t.Fatal(err)
	}
}

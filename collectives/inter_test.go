package collectives

import (
	"fmt"

	"github.com/gompj/gompj/ranks"
)

// interUnderTest makes, from c (4 ranks), the intercommunicator of its even and odd ranks, for TestSteadyStateAllocs.
func interUnderTest(c *ranks.Comm) (*ranks.Comm, error) {
	local, err := c.Split(c.Rank()%2, c.Rank())
	if err != nil {
		return nil, err
	}
	return local.IntercommCreate(0, c, 1-c.Rank()%2, 0) // the leaders are c's ranks 0 and 1
}

// interAllocCases are the intercommunicator collectives of TestSteadyStateAllocs, on the intercommunicator of
// interUnderTest: rooted ones at both groups' rank 0 and 1, buffers boxed once.
func interAllocCases() []allocCase {
	var cases []allocCase
	add := func(name string, mk func(c *ranks.Comm) func() error) {
		cases = append(cases, allocCase{name: "inter/" + name, mk: mk})
	}
	add("barrier", func(c *ranks.Comm) func() error { return func() error { return Barrier(c) } })
	for _, n := range []int{1, 1000, 9000} {
		for _, side := range []int{0, 1} {
			for _, root := range []int{0, 1} {
				// root's argument on this rank: Root, ProcNull or the root's remote rank
				arg := func(c *ranks.Comm) int {
					switch {
					case c.WorldRank(c.Rank())%2 != side:
						return root
					case c.Rank() == root:
						return ranks.Root
					}
					return ranks.ProcNull
				}
				v := fmt.Sprintf("n=%d/side%d/root%d", n, side, root)
				add("bcast/"+v, func(c *ranks.Comm) func() error {
					var buf any = make([]float64, n)
					a := arg(c)
					return func() error { return Bcast(c, buf, a) }
				})
				add("reduce/"+v, func(c *ranks.Comm) func() error {
					var send, recv any = make([]float64, n), make([]float64, n)
					a := arg(c)
					return func() error { return Reduce(c, send, recv, Sum, a) }
				})
				add("gather/"+v, func(c *ranks.Comm) func() error {
					var send, recv any = make([]float64, n), make([]float64, 2*n)
					a := arg(c)
					return func() error { return Gather(c, send, recv, a) }
				})
				add("scatter/"+v, func(c *ranks.Comm) func() error {
					var send, recv any = make([]float64, 2*n), make([]float64, n)
					a := arg(c)
					return func() error { return Scatter(c, send, recv, a) }
				})
				add("gatherv/"+v, func(c *ranks.Comm) func() error {
					var send, recv any = make([]float64, n+c.Rank()), make([]float64, 2*n+2)
					counts, displs, a := []int{n, n + 1}, []int{n + 1, 0}, arg(c)
					return func() error { return Gatherv(c, send, recv, counts, displs, a) }
				})
				add("scatterv/"+v, func(c *ranks.Comm) func() error {
					var send, recv any = make([]float64, 2*n+2), make([]float64, n+c.Rank())
					counts, displs, a := []int{n, n + 1}, []int{n + 1, 0}, arg(c)
					return func() error { return Scatterv(c, send, counts, displs, recv, a) }
				})
			}
		}
		add(fmt.Sprintf("allreduce/n=%d", n), func(c *ranks.Comm) func() error {
			var send, recv any = make([]float64, n), make([]float64, n)
			return func() error { return Allreduce(c, send, recv, Sum) }
		})
		add(fmt.Sprintf("allgather/n=%d", n), func(c *ranks.Comm) func() error {
			var send, recv any = make([]float64, n), make([]float64, 2*n)
			return func() error { return Allgather(c, send, recv) }
		})
		add(fmt.Sprintf("alltoall/n=%d", n), func(c *ranks.Comm) func() error {
			var send, recv any = make([]float64, 2*n), make([]float64, 2*n)
			return func() error { return Alltoall(c, send, recv) }
		})
		add(fmt.Sprintf("allgatherv/n=%d", n), func(c *ranks.Comm) func() error {
			var send, recv any = make([]float64, n+c.Rank()), make([]float64, 2*n+1)
			counts := []int{n, n + 1}
			return func() error { return Allgatherv(c, send, recv, counts, nil) }
		})
		add(fmt.Sprintf("alltoallv/n=%d", n), func(c *ranks.Comm) func() error {
			// to remote rank k: n+k elements; from remote rank k: n+me elements, with a gap of one
			me := c.Rank()
			var send, recv any = make([]float64, 2*n+1), make([]float64, 2*(n+me+1))
			sc, rc, rd := []int{n, n + 1}, []int{n + me, n + me}, []int{0, n + me + 1}
			return func() error { return Alltoallv(c, send, sc, nil, recv, rc, rd) }
		})
		add(fmt.Sprintf("reduce_scatter/n=%d", n), func(c *ranks.Comm) func() error {
			var send, recv any = make([]float64, 2*n+1), make([]float64, n+1)
			counts := []int{n, n + 1}
			return func() error { return ReduceScatter(c, send, recv, counts, Sum) }
		})
		add(fmt.Sprintf("reduce_scatter_block/n=%d", n), func(c *ranks.Comm) func() error {
			var send, recv any = make([]float64, 2*n), make([]float64, n)
			return func() error { return ReduceScatterBlock(c, send, recv, Sum) }
		})
	}
	return cases
}

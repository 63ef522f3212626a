package gompj_test

import (
	"fmt"
	"log"

	"github.com/gompj/gompj"
)

// Run takes the job's shape from the environment `gompj run` sets (one rank per CPU without a launcher), so the
// body asks the communicator how many ranks there are rather than assuming.
func ExampleRun() {
	err := gompj.Run(func(c *gompj.Comm) error {
		one, all := []int{1}, []int{0}
		if err := c.Allreduce(one, all, gompj.Sum); err != nil {
			return err
		}
		if c.Rank() == 0 {
			fmt.Println("every rank took part:", all[0] == c.Size())
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: every rank took part: true
}

// RunWith fixes the shape in code, which suits tests; zero fields still come from the environment or defaults.
func ExampleRunWith() {
	err := gompj.RunWith(gompj.Config{Ranks: 4}, func(c *gompj.Comm) error {
		if c.Rank() == 0 {
			fmt.Println(c.Size(), "ranks")
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: 4 ranks
}

// A blocking send and its receive. Slices of primitive types travel as their memory; the status says who sent
// what, and how many elements.
func ExampleComm_Send() {
	err := gompj.RunWith(gompj.Config{Ranks: 2}, func(c *gompj.Comm) error {
		switch c.Rank() {
		case 0:
			return c.Send([]float64{1.5, 2.5, 3.5}, 1, 7)
		case 1:
			buf := make([]float64, 8) // room for more than arrives
			st, err := c.Recv(buf, gompj.AnySource, gompj.AnyTag)
			if err != nil {
				return err
			}
			fmt.Printf("from rank %d, tag %d: %v\n", st.Source, st.Tag, buf[:st.Count()])
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: from rank 0, tag 7: [1.5 2.5 3.5]
}

// Nonblocking calls start at once; Waitall completes them together. Every rank passes its rank to its right
// neighbour round a ring, then rank 0 gathers what each one received.
func ExampleComm_Isend() {
	err := gompj.RunWith(gompj.Config{Ranks: 4}, func(c *gompj.Comm) error {
		me, n := c.Rank(), c.Size()
		out, in := []int{me}, []int{-1}
		recv, err := c.Irecv(in, (me+n-1)%n, 0)
		if err != nil {
			return err
		}
		send, err := c.Isend(out, (me+1)%n, 0)
		if err != nil {
			return err
		}
		if err := gompj.Waitall(recv, send); err != nil {
			return err
		}
		got := make([]int, n)
		if err := c.Gather(in, got, 0); err != nil {
			return err
		}
		if me == 0 {
			fmt.Println("rank i received from:", got)
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: rank i received from: [3 0 1 2]
}

// Allreduce combines every rank's contribution element by element and gives each rank the result.
func ExampleComm_Allreduce() {
	err := gompj.RunWith(gompj.Config{Ranks: 4}, func(c *gompj.Comm) error {
		mine := []float64{float64(c.Rank()), 1}
		total := make([]float64, 2)
		if err := c.Allreduce(mine, total, gompj.Sum); err != nil {
			return err
		}
		if c.Rank() == 3 {
			fmt.Println("sum of ranks, count of ranks:", total)
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: sum of ranks, count of ranks: [6 4]
}

// Bcast copies the root's buffer to every rank: a slice of a primitive type, or a pointer to any other value.
func ExampleComm_Bcast() {
	type params struct {
		Steps int
		Tol   float64
	}
	err := gompj.RunWith(gompj.Config{Ranks: 4}, func(c *gompj.Comm) error {
		grid := make([]int, 3)
		var p params
		if c.Rank() == 0 {
			grid = []int{64, 64, 32}
			p = params{Steps: 100, Tol: 1e-6}
		}
		if err := c.Bcast(grid, 0); err != nil {
			return err
		}
		if err := c.Bcast(&p, 0); err != nil {
			return err
		}
		if c.Rank() == 2 {
			fmt.Printf("rank 2 has grid %v and %+v\n", grid, p)
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: rank 2 has grid [64 64 32] and {Steps:100 Tol:1e-06}
}

// Split makes one communicator per color, its ranks ordered by key: here the even and the odd world ranks, each
// group numbered from 0. Rank 0 gathers what every rank sees.
func ExampleComm_Split() {
	err := gompj.RunWith(gompj.Config{Ranks: 6}, func(c *gompj.Comm) error {
		color := c.Rank() % 2
		half, err := c.Split(color, c.Rank())
		if err != nil {
			return err
		}
		defer half.Free()
		mine := []int{color, half.Rank(), half.Size()}
		all := make([]int, 3*c.Size())
		if err := c.Gather(mine, all, 0); err != nil {
			return err
		}
		if c.Rank() == 0 {
			for r := range c.Size() {
				fmt.Printf("world rank %d: color %d, rank %d of %d\n", r, all[3*r], all[3*r+1], all[3*r+2])
			}
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// world rank 0: color 0, rank 0 of 3
	// world rank 1: color 1, rank 0 of 3
	// world rank 2: color 0, rank 1 of 3
	// world rank 3: color 1, rank 1 of 3
	// world rank 4: color 0, rank 2 of 3
	// world rank 5: color 1, rank 2 of 3
}

// A user-defined reduction. This one is not commutative: each entry keeps the value of the lowest rank that has
// one (non-zero), which is only well defined because gompj applies such an op in rank order.
func ExampleNewOp() {
	firstNonZero := gompj.NewOp(func(in, inout []int) {
		for i := range inout {
			if in[i] != 0 { // in holds the lower ranks' contribution
				inout[i] = in[i]
			}
		}
	}, false)
	err := gompj.RunWith(gompj.Config{Ranks: 4}, func(c *gompj.Comm) error {
		me := c.Rank()
		mine := make([]int, 4)
		for i := 0; i <= me; i++ { // rank r knows entries 0..r, as 10*(r+1)+i
			mine[i] = 10*(me+1) + i
		}
		result := make([]int, 4)
		if err := c.Allreduce(mine, result, firstNonZero); err != nil {
			return err
		}
		if me == 0 {
			fmt.Println(result)
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: [10 21 32 43]
}

// Alloc gives the big buffers a code exchanges again and again memory that node processes of one host copy
// between mappings, instead of by a system call per message (in a job of one node process, as here, it is Go
// memory). Give it back with Free.
func ExampleAlloc() {
	err := gompj.RunWith(gompj.Config{Ranks: 4}, func(c *gompj.Comm) error {
		n := 1 << 16 // float64s per peer
		send, err := gompj.Alloc[float64](c, n*c.Size())
		if err != nil {
			return err
		}
		defer gompj.Free(c, send)
		recv, err := gompj.Alloc[float64](c, n*c.Size())
		if err != nil {
			return err
		}
		defer gompj.Free(c, recv)
		for i := range send {
			send[i] = float64(c.Rank())
		}
		if err := c.Alltoall(send, recv); err != nil {
			return err
		}
		if c.Rank() == 0 {
			fmt.Println("from rank 3:", recv[3*n])
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: from rank 3: 3
}

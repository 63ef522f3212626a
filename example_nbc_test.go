package gompj_test

import (
	"fmt"
	"log"

	"github.com/gompj/gompj"
)

// Iallreduce starts an allreduce and returns at once: the rank computes while the collective moves on by itself,
// then waits for it.
func ExampleComm_Iallreduce() {
	err := gompj.RunWith(gompj.Config{Ranks: 4}, func(c *gompj.Comm) error {
		mine := []float64{float64(c.Rank()), 1}
		total := make([]float64, 2)
		req, err := c.Iallreduce(mine, total, gompj.Sum)
		if err != nil {
			return err
		}
		work := 0 // computation that touches neither mine nor total
		for i := 0; i < 1000; i++ {
			work += i
		}
		if _, err := req.Wait(); err != nil {
			return err
		}
		if c.Rank() == 3 {
			fmt.Println("sum of ranks, count of ranks:", total, "work:", work)
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: sum of ranks, count of ranks: [6 4] work: 499500
}

// AllreduceInit builds an allreduce once; each Start runs it again on the send buffer as it is then.
func ExampleComm_AllreduceInit() {
	err := gompj.RunWith(gompj.Config{Ranks: 3}, func(c *gompj.Comm) error {
		mine, total := make([]int, 1), make([]int, 1)
		sum, err := c.AllreduceInit(mine, total, gompj.Sum)
		if err != nil {
			return err
		}
		defer sum.Free()
		for step := 1; step <= 3; step++ {
			mine[0] = step * (c.Rank() + 1)
			if err := sum.Start(); err != nil {
				return err
			}
			if _, err := sum.Wait(); err != nil {
				return err
			}
			if c.Rank() == 0 {
				fmt.Println("step", step, "total", total[0])
			}
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// step 1 total 6
	// step 2 total 12
	// step 3 total 18
}

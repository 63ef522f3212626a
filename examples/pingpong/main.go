// Command pingpong measures the half round trip between ranks 0 and 1 for a few message sizes, the way
// osu_latency does. Run it with 2 ranks on one node (goroutines) or on two node processes (network).
package main

import (
	"fmt"
	"os"

	"github.com/gompj/gompj"
)

func main() {
	err := gompj.Run(func(c *gompj.Comm) error {
		if c.Size() < 2 {
			return fmt.Errorf("pingpong needs 2 ranks, the job has %d", c.Size())
		}
		if c.Rank() > 1 {
			return nil
		}
		peer := 1 - c.Rank()
		for _, size := range []int{0, 64, 4096, 1 << 20} {
			buf := make([]byte, size)
			iters := 2000
			if size >= 1<<20 {
				iters = 50
			}
			var t0 float64
			for i := -iters / 10; i < iters; i++ {
				if i == 0 {
					t0 = gompj.Wtime()
				}
				if c.Rank() == 0 {
					if err := c.Send(buf, peer, 0); err != nil {
						return err
					}
					if _, err := c.Recv(buf, peer, 0); err != nil {
						return err
					}
				} else {
					if _, err := c.Recv(buf, peer, 0); err != nil {
						return err
					}
					if err := c.Send(buf, peer, 0); err != nil {
						return err
					}
				}
			}
			if c.Rank() == 0 {
				fmt.Printf("%8d bytes  %10.2f us\n", size, (gompj.Wtime()-t0)*1e6/float64(2*iters))
			}
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(gompj.ExitCode(err))
	}
}

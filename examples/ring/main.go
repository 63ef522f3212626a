// Command ring passes a token round the ranks: rank 0 starts it, every rank adds its rank and passes it on, and
// rank 0 checks the sum after the given number of laps (argument 1, default 10).
package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/gompj/gompj"
)

func main() {
	laps := 10
	if len(os.Args) > 1 {
		n, err := strconv.Atoi(os.Args[1])
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "usage: ring [laps]\n")
			os.Exit(2)
		}
		laps = n
	}
	err := gompj.Run(func(c *gompj.Comm) error {
		me, np := c.Rank(), c.Size()
		next, prev := (me+1)%np, (me+np-1)%np
		token := []int64{0}
		for lap := 0; lap < laps; lap++ {
			if me == 0 {
				if err := c.Send(token, next, lap); err != nil {
					return err
				}
				if _, err := c.Recv(token, prev, lap); err != nil {
					return err
				}
				continue
			}
			if _, err := c.Recv(token, prev, lap); err != nil {
				return err
			}
			token[0] += int64(me)
			if err := c.Send(token, next, lap); err != nil {
				return err
			}
		}
		if me == 0 {
			want := int64(laps) * int64(np) * int64(np-1) / 2
			if token[0] != want {
				return fmt.Errorf("token %d after %d laps, want %d", token[0], laps, want)
			}
			fmt.Printf("ring: %d ranks, %d laps, token %d: ok\n", np, laps, token[0])
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(gompj.ExitCode(err))
	}
}

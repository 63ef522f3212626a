// Command halo runs a 1-D heat diffusion on a periodic line of points split into one block per rank. Every step
// each rank exchanges its edge points with its neighbours through persistent requests, built once (SendInit,
// RecvInit) and restarted every step (Startall), updates its interior while the messages move, then its edges.
// At the end rank 0 gathers the line and checks it, bit for bit, against the same steps computed serially.
// Arguments: points per rank (default 4096) and steps (default 200).
package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/gompj/gompj"
)

const alpha = 0.25

func initial(i int) float64 { return float64((i * 7919) % 101) }

func main() {
	n, steps := 4096, 200
	for k, p := range []*int{&n, &steps} {
		if len(os.Args) > k+1 {
			v, err := strconv.Atoi(os.Args[k+1])
			if err != nil || v < 1 {
				fmt.Fprintf(os.Stderr, "usage: halo [points per rank] [steps]\n")
				os.Exit(2)
			}
			*p = v
		}
	}
	err := gompj.Run(func(c *gompj.Comm) error {
		me, np := c.Rank(), c.Size()
		left, right := (me+np-1)%np, (me+1)%np
		// u[0] and u[n+1] are the ghost points: the neighbours' edges.
		u, next := make([]float64, n+2), make([]float64, n+2)
		for i := 1; i <= n; i++ {
			u[i] = initial(me*n + i - 1)
		}
		// The requests name sub-slices of u: a persistent send reads its slice at each Start, a persistent receive
		// writes into its slice at each run.
		var reqs [4]*gompj.Request
		var err error
		if reqs[0], err = c.RecvInit(u[0:1], left, 0); err != nil {
			return err
		}
		if reqs[1], err = c.RecvInit(u[n+1:n+2], right, 1); err != nil {
			return err
		}
		if reqs[2], err = c.SendInit(u[n:n+1], right, 0); err != nil {
			return err
		}
		if reqs[3], err = c.SendInit(u[1:2], left, 1); err != nil {
			return err
		}
		for step := 0; step < steps; step++ {
			if err := gompj.Startall(reqs[:]...); err != nil {
				return err
			}
			for i := 2; i < n; i++ { // the interior needs no ghost point
				next[i] = u[i] + alpha*(u[i-1]-2*u[i]+u[i+1])
			}
			if err := gompj.Waitall(reqs[:]...); err != nil {
				return err
			}
			next[1] = u[1] + alpha*(u[0]-2*u[1]+u[2])
			next[n] = u[n] + alpha*(u[n-1]-2*u[n]+u[n+1])
			copy(u[1:n+1], next[1:n+1]) // into u itself: the requests keep pointing at it
		}
		for _, r := range reqs {
			if err := r.Free(); err != nil {
				return err
			}
		}
		var all []float64
		if me == 0 {
			all = make([]float64, n*np)
		}
		if err := c.Gather(u[1:n+1], all, 0); err != nil {
			return err
		}
		if me != 0 {
			return nil
		}
		serial, tmp := make([]float64, n*np), make([]float64, n*np)
		for i := range serial {
			serial[i] = initial(i)
		}
		m := len(serial)
		for step := 0; step < steps; step++ {
			for i := range serial {
				tmp[i] = serial[i] + alpha*(serial[(i+m-1)%m]-2*serial[i]+serial[(i+1)%m])
			}
			serial, tmp = tmp, serial
		}
		for i := range all {
			if all[i] != serial[i] {
				return fmt.Errorf("point %d after %d steps: %v, serially %v", i, steps, all[i], serial[i])
			}
		}
		fmt.Printf("halo: %d ranks x %d points, %d steps with persistent requests: ok\n", np, n, steps)
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(gompj.ExitCode(err))
	}
}

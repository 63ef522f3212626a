// Command npb runs one NAS Parallel Benchmark kernel as an ordinary gompj program:
//
//	gompj run -np 4 ./examples/npb CG S
//	gompj run -np 8 -nodes 2 ./examples/npb FT A
//
// Arguments: the kernel (EP, IS, CG, MG or FT) and the class (S, W, A, B or C, default S). Rank 0 prints NPB's
// report. The exit status is 0 when the kernel verified, 1 when it did not (or the job failed), 2 for bad
// arguments or a process count the kernel does not allow.
package main

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"github.com/gompj/gompj"
	"github.com/gompj/gompj/npb"
)

func main() {
	if len(os.Args) < 2 || len(os.Args) > 3 {
		fmt.Fprintf(os.Stderr, "usage: npb KERNEL [CLASS]   (KERNEL: %s; CLASS: S, W, A, B or C)\n",
			strings.Join(npb.KernelNames(), ", "))
		os.Exit(2)
	}
	kernel, class := strings.ToUpper(os.Args[1]), byte('S')
	if len(os.Args) == 3 {
		c := strings.ToUpper(os.Args[2])
		if len(c) != 1 {
			fmt.Fprintf(os.Stderr, "npb: class %q: want one of S, W, A, B, C\n", os.Args[2])
			os.Exit(2)
		}
		class = c[0]
	}
	// Every kernel runs on one rank: this checks the kernel's name and the class before the job starts.
	if err := npb.Allowed(kernel, class, 1); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}

	// Every rank gets the same Result, so every node process learns the verdict and exits with it.
	var verified atomic.Bool
	err := gompj.Run(func(c *gompj.Comm) error {
		if err := npb.Allowed(kernel, class, c.Size()); err != nil {
			// Every rank gets the same answer. Rank 0 explains and ends the job with status 2; the others wait
			// in a barrier that the abort ends, so that the job's status is 2 on every node.
			if c.Rank() == 0 {
				fmt.Fprintln(os.Stderr, err)
				c.Abort(2)
			}
			return c.Barrier()
		}
		res, err := npb.Run(c, kernel, class)
		if err != nil {
			return err
		}
		layout, err := npb.LayoutOf(c, "tcp")
		if err != nil {
			return err
		}
		verified.Store(res.Verified)
		if c.Rank() == 0 {
			res.Report(os.Stdout, layout.String())
			if !res.Verified {
				fmt.Fprintf(os.Stderr, "npb: %s class %c did not verify\n", kernel, class)
			}
		}
		return nil
	})
	if err != nil {
		code := gompj.ExitCode(err)
		if code != 2 { // status 2 was explained by rank 0 already
			fmt.Fprintln(os.Stderr, err)
		}
		os.Exit(code)
	}
	if !verified.Load() {
		os.Exit(1)
	}
}

// Command faulty is a test program for the launcher. Every rank ends in a receive that never matches, so only an
// abort ends the job, except in mode "ok". Modes (argument 1):
//
//	ok          every rank prints "OK rank R node-pid P" and returns
//	abort CODE  the last rank calls Abort(CODE)
//	panic       the last rank panics
//	kill        the last rank kills its own process (SIGKILL)
//	ready       every rank prints "READY rank R pid P" first (tests then kill or interrupt something)
//
// A rank whose call fails prints "ABORTED rank R: ERR" if the error is gompj.ErrAborted.
package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/gompj/gompj"
	"github.com/gompj/gompj/node"
)

func main() {
	mode := "ready"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	err := gompj.Run(func(c *gompj.Comm) error {
		err := body(c, mode)
		if errors.Is(err, gompj.ErrAborted) {
			fmt.Printf("ABORTED rank %d: %v\n", c.Rank(), err)
		}
		return err
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(node.ExitCode(err))
	}
}

func body(c *gompj.Comm, mode string) error {
	last := c.Rank() == c.Size()-1
	// Everyone is in the body before anything happens.
	if _, err := c.Sendrecv([]int{c.Rank()}, (c.Rank()+1)%c.Size(), 1, []int{0}, (c.Rank()+c.Size()-1)%c.Size(), 1); err != nil {
		return err
	}
	switch {
	case mode == "ok":
		fmt.Printf("OK rank %d pid %d\n", c.Rank(), os.Getpid())
		return nil
	case mode == "abort" && last:
		code, _ := strconv.Atoi(os.Args[2])
		c.Abort(code)
	case mode == "panic" && last:
		panic("faulty: deliberate panic")
	case mode == "kill" && last:
		if p, err := os.FindProcess(os.Getpid()); err == nil {
			p.Kill()
		}
	case mode == "ready":
		fmt.Printf("READY rank %d pid %d\n", c.Rank(), os.Getpid())
	}
	_, err := c.Recv([]int{0}, (c.Rank()+1)%c.Size(), 999)
	return err
}

// Command hello prints one line per rank: its rank, the job size and the node process it runs in.
package main

import (
	"fmt"
	"os"

	"github.com/gompj/gompj"
)

func main() {
	err := gompj.Run(func(c *gompj.Comm) error {
		host, _ := os.Hostname()
		fmt.Printf("hello from rank %d of %d (pid %d on %s)\n", c.Rank(), c.Size(), os.Getpid(), host)
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(gompj.ExitCode(err))
	}
}

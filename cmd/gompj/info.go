package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"text/tabwriter"

	"github.com/gompj/gompj/bench"
	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/node"
)

func init() {
	register(&command{name: "info", summary: "version, devices and the effective configuration",
		usage: func(w io.Writer) {
			fmt.Fprintln(w, "usage: gompj info\n\nPrints gompj's version, the devices built in, every configuration setting with its value and\nsource (default, env, slurm), and the collective algorithm table in force.")
		}, run: infoCmd})
}

func infoCmd(args []string) int {
	w := os.Stdout
	bi, _ := debug.ReadBuildInfo()
	version, commit := moduleVersion(bi)
	fmt.Fprintf(w, "gompj %s (%s, %s/%s, %d CPUs)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	if commit != "" {
		fmt.Fprintln(w, commit)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "devices:")
	fmt.Fprintln(w, "  shm   intra-node: ranks of a node exchange through their queues   built")
	if err := node.NetworkMissing(); err != nil {
		fmt.Fprintf(w, "  tcp   inter-node: netdev, epoll TCP, one per node process           not built: %v\n", err)
	} else {
		fmt.Fprintln(w, "  tcp   inter-node: netdev, epoll TCP, one per node process           built (-dev tcp)")
	}
	fmt.Fprintln(w, "  rdma  inter-node: verbs-style device                                 not built")
	fmt.Fprintln(w, "\nconfiguration:")
	settings, err := node.Effective()
	if err != nil {
		fmt.Fprintf(os.Stderr, "gompj info: %v\n", err)
		return 1
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, s := range settings {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", s.Variable, s.Value, s.Source)
	}
	for _, name := range unknownVariables(os.Environ()) {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", name, "not a gompj variable (misspelt?): ignored", "env")
	}
	tw.Flush()
	fmt.Fprintf(w, "\nbenchmarks: %s\n", strings.Join(bench.Names(), ", "))
	fmt.Fprintf(w, "\ncollective algorithms:\n%s\n", collectives.Describe())
	return 0
}

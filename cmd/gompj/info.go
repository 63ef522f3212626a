package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"

	"github.com/gompj/gompj/bench"
	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/internal/env"
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
	fmt.Fprintf(w, "gompj %s (%s, %s/%s, %d CPUs)\n\n", Version, runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	settings, err := node.Effective()
	if err != nil {
		fmt.Fprintf(os.Stderr, "gompj info: %v\n", err)
		return 1
	}
	printDevices(w, settings)
	fmt.Fprintln(w, "\nconfiguration:")
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, s := range settings {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", s.Variable, s.Value, s.Source)
	}
	for _, name := range env.Unknown(os.Environ()) {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", name, "not a gompj variable (misspelt?): ignored", "env")
	}
	tw.Flush()
	fmt.Fprintf(w, "\nbenchmarks: %s\n", strings.Join(bench.Names(), ", "))
	fmt.Fprintf(w, "\ncollective algorithms:\n%s\n", collectives.Describe())
	return 0
}

// printDevices lists the devices of this build and says which serves which peers.
func printDevices(w io.Writer, settings []node.Setting) {
	get := func(v string) string {
		for _, s := range settings {
			if s.Variable == v {
				return s.Value
			}
		}
		return ""
	}
	fmt.Fprintln(w, "devices:")
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "  %s\t%s\t%s\n", "local", "ranks of one node process: each other's queues, in the process's memory", "built")
	shmBuilt := false
	for _, d := range node.Devices() {
		state := "built"
		if !d.Built {
			state = d.Why
		}
		shmBuilt = shmBuilt || d.Name == node.DevSHM && d.Built
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", d.Name, d.Summary, state)
	}
	tw.Flush()
	inter := get(env.Dev.Name)
	host := node.DevSHM
	switch {
	case !shmBuilt:
		host = inter + " (no shared-memory device in this build)"
	case get(env.HostSHM.Name) == "0":
		host = inter + " (" + env.HostSHM.Name + "=0)"
	}
	if err := node.CheckDevice(inter); err != nil {
		inter += " (" + err.Error() + ")"
	}
	fmt.Fprintf(w, "\nroutes: a peer node process on this host: %s; on another host: %s (%s, -dev)\n", host, inter, env.Dev.Name)
}

package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/gompj/gompj/bench"
	"github.com/gompj/gompj/node"
)

// collectiveTable, when set, returns the collective algorithm table printed by `gompj info`. A file
// info_coll.go sets it once package collectives exports Describe():
//
//	func init() { collectiveTable = collectives.Describe }
var collectiveTable func() string

func init() {
	register(&command{name: "info", summary: "version, devices and the effective configuration",
		usage: func(w io.Writer) {
			fmt.Fprintln(w, "usage: gompj info\n\nPrints gompj's version, the devices built in, every configuration setting with its value and\nsource (default, env, slurm), and the collective algorithms if the build has them.")
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
	for _, s := range settings {
		fmt.Fprintf(w, "  %-24s %-40s %s\n", s.Variable, s.Value, s.Source)
	}
	fmt.Fprintf(w, "\nbenchmarks: %s\n", strings.Join(bench.Names(), ", "))
	if collectiveTable != nil {
		fmt.Fprintf(w, "\ncollective algorithms:\n%s\n", collectiveTable())
	}
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
	fmt.Fprintf(w, "  %-6s %-72s %s\n", "local", "ranks of one node process: each other's queues, in the process's memory", "built")
	for _, d := range node.Devices() {
		state := "built"
		if !d.Built {
			state = d.Why
		}
		fmt.Fprintf(w, "  %-6s %-72s %s\n", d.Name, d.Summary, state)
	}
	inter := get("GOMPJ_DEV")
	host := "shm"
	shmBuilt := false
	for _, d := range node.Devices() {
		shmBuilt = shmBuilt || d.Name == node.DevSHM && d.Built
	}
	switch {
	case !shmBuilt:
		host = inter + " (no shared-memory device in this build)"
	case get("GOMPJ_HOST_SHM") == "false":
		host = inter + " (GOMPJ_HOST_SHM=0)"
	}
	if err := node.CheckDevice(inter); err != nil {
		inter += " (" + err.Error() + ")"
	}
	fmt.Fprintf(w, "\nroutes: a peer node process on this host: %s; on another host: %s (GOMPJ_DEV, -dev)\n", host, inter)
}

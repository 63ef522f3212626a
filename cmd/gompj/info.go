package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"text/tabwriter"

	"github.com/gompj/gompj/bench"
	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/internal/env"
	"github.com/gompj/gompj/node"
	"github.com/gompj/gompj/ranks"
)

func init() {
	register(&command{name: "info", summary: "version, devices and routes, the effective configuration",
		usage: func(w io.Writer) { infoFlags(new(runOpts)).printHelp(w) }, run: infoCmd})
	register(&command{name: "info-node", hidden: true, run: infoNodeCmd,
		usage: func(w io.Writer) { fmt.Fprintln(w, "usage: gompj info-node (started by gompj info -nodes)") }})
}

func infoFlags(o *runOpts) *flagSet {
	fs := flag.NewFlagSet("info", flag.ContinueOnError)
	o.addFlags(fs, 0)
	return &flagSet{FlagSet: fs, synopsis: "gompj info [-np N -nodes K | -hosts h1,h2 | -hostfile F] [-dev tcp|rdma]",
		extra: `Prints gompj's version, the devices built in and how they work on this host (the shared-memory device's
copy of large messages: CMA or through its rings), which device serves which peers, every configuration setting
with its value and source (default, env, slurm), and the collective algorithm table in force.

With -nodes or -hosts it also starts a small job of that shape and every node process prints its route table:
which device serves which peer node processes, as the job really chose.`}
}

func infoCmd(args []string) int {
	var o runOpts
	fs := infoFlags(&o)
	if code, ok := fs.parse("info", args, true); !ok {
		return code
	}
	if o.nodes > 1 || o.hosts != "" || o.hostfile != "" {
		if o.np == 0 {
			o.np = max(o.nodes, 1)
		}
		nodes, hosts, err := o.target()
		if err != nil {
			fmt.Fprintf(os.Stderr, "gompj info: %v\n", err)
			return 2
		}
		self, err := os.Executable()
		if err != nil {
			fmt.Fprintf(os.Stderr, "gompj info: %v\n", err)
			return 1
		}
		l := o.launch(self, []string{"info-node"})
		l.nodes, l.hosts = nodes, hosts
		return l.runMulti()
	}
	w := os.Stdout
	bi, _ := debug.ReadBuildInfo()
	version, commit := moduleVersion(bi)
	fmt.Fprintf(w, "gompj %s (%s, %s/%s, %d CPUs)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	if commit != "" {
		fmt.Fprintln(w, commit)
	}
	fmt.Fprintln(w)
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
	for _, name := range unknownVariables(os.Environ()) {
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
	cfg, err := node.FromEnv(node.Config{})
	if err != nil {
		fmt.Fprintf(w, "  (%v)\n", err)
	}
	for _, d := range node.Devices(cfg) {
		state := "built"
		if !d.Built {
			state = d.Why
		} else if d.Status != "" {
			state = "built; " + d.Status
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

// infoNodeCmd is one node process of `gompj info -nodes`: the first rank of each node prints its route table.
func infoNodeCmd(args []string) int {
	cfg, err := node.FromEnv(node.Config{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "gompj info-node: %v\n", err)
		return 2
	}
	err = node.Run(cfg, func(c *ranks.Comm) error {
		if lo, _ := c.World().Local(); c.Rank() == lo {
			fmt.Printf("routes of %s\n", c.World().Routes())
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "gompj info-node: %v\n", err)
		return node.ExitCode(err)
	}
	return 0
}

package main

import (
	"fmt"
	"io"
	"os"

	"github.com/gompj/gompj/node"
)

func init() {
	register(&command{name: "help", summary: "documentation of a command, or of the environment (gompj help env)",
		usage: func(w io.Writer) { fmt.Fprintln(w, "usage: gompj help [COMMAND | env]") }, run: helpCmd})
}

// launcherVariables are read by the gompj command itself, not by the runtime.
var launcherVariables = [][2]string{
	{"GOMPJ_SSH", "ssh command and options used by -hosts (default \"ssh\"), e.g. \"ssh -p 2222 -i key\""},
	{"GOMPJ_KEY_FILE", "Slurm: the key file the job secret is derived from when GOMPJ_SECRET is unset (default ~/.gompj/key)"},
}

func helpCmd(args []string) int {
	w := os.Stdout
	if len(args) == 0 {
		listCommands(w)
		fmt.Fprintln(w)
		printEnv(w)
		return 0
	}
	if args[0] == "env" {
		printEnv(w)
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "gompj help: unknown command %q\n", args[0])
		return 2
	}
	c.usage(w)
	return 0
}

func printEnv(w io.Writer) {
	fmt.Fprintln(w, "environment (read by every gompj program; `gompj run` sets the job's identity for its node processes):")
	for _, v := range append(append([][2]string{}, node.Variables...), launcherVariables...) {
		fmt.Fprintf(w, "  %-24s %s\n", v[0], v[1])
	}
	fmt.Fprintln(w, `
A starter other than gompj run (a batch system, a script) sets for every node process: GOMPJ_NP, GOMPJ_NODES,
GOMPJ_NODE_ID, GOMPJ_COORDINATOR (host:port), GOMPJ_SECRET (the same random string of 16+ bytes for every node of
the job, in the environment, never on a command line), and either runs a coordinator itself or sets
GOMPJ_COORDINATOR_SERVE=1 for node 0, which then listens on GOMPJ_COORDINATOR. Under srun (Slurm) nothing needs
to be set: the SLURM_* variables give all of it.`)
}

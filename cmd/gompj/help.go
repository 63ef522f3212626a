package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/internal/env"
)

func init() {
	register(&command{name: "help", summary: "documentation of a command, or of the environment (gompj help env)",
		usage: func(w io.Writer) { fmt.Fprintln(w, "usage: gompj help [COMMAND | env]") }, run: helpCmd})
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

// unknownVariables returns the GOMPJ_* names in environ that nothing reads: names no definition knows, and
// GOMPJ_COLL_<NAME> for a NAME that is no collective (GOMPJ_COLL_ALLREDUSE), GOMPJ_COLL_I<NAME> for a NAME with no
// nonblocking form.
func unknownVariables(environ []string) []string {
	out := env.Unknown(environ)
	for _, m := range env.CollAlgorithm.Members(environ) {
		name := strings.TrimPrefix(m[0], env.CollAlgorithm.Member(""))
		if !slices.Contains(collectives.Collectives(), strings.ToLower(name)) {
			out = append(out, m[0])
		}
	}
	for _, m := range env.CollNonblocking.Members(environ) {
		name := strings.TrimPrefix(m[0], env.CollNonblocking.Member(""))
		if !slices.Contains(collectives.NonblockingCollectives(), strings.ToLower(name)) {
			out = append(out, m[0])
		}
	}
	return out
}

// printEnv lists every variable of internal/env but the tests', by group, and what each collective's
// GOMPJ_COLL_<NAME> accepts.
func printEnv(w io.Writer) {
	fmt.Fprintln(w, "environment (read by every gompj program; `gompj run` sets the job's identity for its node processes;")
	fmt.Fprintln(w, "* marks the variables every node process of a job must agree on; `gompj info` shows the values in force):")
	var group env.Group
	for _, v := range env.All() {
		if v.Role == env.Test {
			continue
		}
		if v.Group != group {
			group = v.Group
			fmt.Fprintf(w, "\n %s\n", group)
		}
		name := v.Name
		if v.Job {
			name += "*"
		}
		fmt.Fprintf(w, "  %-25s %s (%s; default %s)\n", name, v.Meaning, v.Kind, v.DefaultText())
		if v == env.CollAlgorithm {
			for _, c := range collectives.Collectives() {
				fmt.Fprintf(w, "  %27s%-15s %s\n", "", strings.ToUpper(c)+":", strings.Join(collectives.Algorithms(c), ", "))
			}
		}
		if v == env.CollNonblocking {
			var names []string
			for _, c := range collectives.NonblockingCollectives() {
				names = append(names, strings.ToUpper(c))
			}
			fmt.Fprintf(w, "  %27sNAME: %s (NAME's algorithms)\n", "", strings.Join(names, ", "))
		}
	}
	fmt.Fprintln(w, `
A starter other than gompj run (a batch system, a script) sets for every node process: GOMPJ_NP, GOMPJ_NODES,
GOMPJ_NODE_ID, GOMPJ_COORDINATOR (host:port), GOMPJ_SECRET (the same random string of 16+ bytes for every node of
the job, in the environment, never on a command line), and either runs a coordinator itself or sets
GOMPJ_COORDINATOR_SERVE=1 for node 0, which then listens on GOMPJ_COORDINATOR. Under srun (Slurm) nothing needs
to be set: the SLURM_* variables give all of it.`)
}

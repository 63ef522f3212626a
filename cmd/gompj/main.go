package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// command is one subcommand of gompj.
type command struct {
	name    string
	summary string                  // one line for the command list
	usage   func(w io.Writer)       // the whole help text (flags included)
	run     func(args []string) int // returns the exit status
	hidden  bool                    // internal (node programs started by the launcher)
}

var commands = map[string]*command{}

// register adds a subcommand; other files (and other engineers' files: npb) call it from init.
func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("gompj: duplicate command " + c.name)
	}
	commands[c.name] = c
}

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		listCommands(stderr)
		return 2
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		name = "help"
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "gompj: unknown command %q\n\n", name)
		listCommands(stderr)
		return 2
	}
	return c.run(args[1:])
}

func listCommands(w io.Writer) {
	fmt.Fprintln(w, "usage: gompj COMMAND [arguments]")
	fmt.Fprintln(w, "\ncommands:")
	var names []string
	for n, c := range commands {
		if !c.hidden {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\n`gompj help COMMAND` documents a command's flags; `gompj help env` the environment variables.")
}

// splitWords splits a command line on white space (no quoting: for GOMPJ_SSH-style settings).
func splitWords(s string) []string { return strings.Fields(s) }

package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/gompj/gompj/internal/env"
	"github.com/gompj/gompj/node"
)

func init() {
	register(&command{name: "run", summary: "run a program on N ranks: this box, several node processes, ssh hosts",
		usage: func(w io.Writer) { runFlags(new(runOpts)).printHelp(w) }, run: runCmd})
}

// runOpts are the flags shared by run and bench for where a job runs.
type runOpts struct {
	np, nodes, rpn int
	hosts          string
	hostfile       string
	dev            string
	prefix         bool
	prefixNode     bool
	ssh            string
	iface          string
	timeout        time.Duration
	envErr         error // a malformed variable behind a flag's default
}

type flagSet struct {
	*flag.FlagSet
	synopsis string
	extra    string
}

func (f *flagSet) printHelp(w io.Writer) {
	fmt.Fprintf(w, "usage: %s\n\nflags:\n", f.synopsis)
	f.SetOutput(w)
	f.PrintDefaults()
	if f.extra != "" {
		fmt.Fprintf(w, "\n%s\n", f.extra)
	}
}

// parse parses a subcommand's arguments. It reports false with the exit status when the command must stop there:
// 0 after printing the help that -h asked for, 2 after a usage error (with the help too when full is set).
func (f *flagSet) parse(cmd string, args []string, full bool) (int, bool) {
	f.SetOutput(io.Discard)
	err := f.Parse(args)
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, flag.ErrHelp):
		f.printHelp(os.Stdout)
		return 0, false
	}
	fmt.Fprintf(os.Stderr, "gompj %s: %v\n", cmd, err)
	if full {
		f.printHelp(os.Stderr)
	}
	return 2, false
}

func (o *runOpts) addFlags(fs *flag.FlagSet, defNP int) {
	fs.IntVar(&o.np, "np", defNP, "number of ranks")
	fs.IntVar(&o.nodes, "nodes", 0, "node processes on this box (default 1; with -ranks-per-node: np/K rounded up)")
	fs.StringVar(&o.hosts, "hosts", "", "comma-separated ssh targets ([user@]host), one node process each")
	fs.StringVar(&o.hostfile, "hostfile", "", "file of ssh targets, one per line (# comments)")
	fs.IntVar(&o.rpn, "ranks-per-node", 0, "ranks per node process (default: np spread evenly, remainder to the first nodes)")
	fs.StringVar(&o.dev, "dev", env.Dev.Text(os.LookupEnv), "device between node processes on different hosts: tcp, or rdma "+
		"(libfabric; a build with -tags ofi)\n(node processes on the same host share memory unless "+env.HostSHM.Name+"=0) (env "+env.Dev.Name+")")
	fs.BoolVar(&o.prefix, "prefix", false, "start every output line of a node process with its ranks, \"[lo-hi] \"")
	fs.BoolVar(&o.prefixNode, "prefix-node", false, "start every output line with \"[node i] \"")
	fs.StringVar(&o.ssh, "ssh", env.SSH.Text(os.LookupEnv), "ssh command and options for -hosts (env "+env.SSH.Name+")")
	fs.StringVar(&o.iface, "iface", "", "address the launcher's coordinator listens on (default: loopback, or the interface that routes to the first host)")
	timeout, err := env.Timeout.Duration(os.LookupEnv)
	if err != nil {
		o.envErr = err
		timeout, _ = time.ParseDuration(env.Timeout.Value)
	}
	fs.DurationVar(&o.timeout, "timeout", timeout, "bootstrap timeout: every node registered and connected (env "+env.Timeout.Name+")")
}

func runFlags(o *runOpts) *flagSet {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	o.addFlags(fs, 0)
	return &flagSet{FlagSet: fs,
		synopsis: "gompj run -np N [-nodes K | -hosts h1,h2 | -hostfile F] [-ranks-per-node K] [-dev tcp|rdma] [-prefix] PROGRAM [args]",
		extra: `PROGRAM is an executable, or a Go package path or directory, which is built first into a temporary directory
(as go run does). With -np alone the program runs as one process whose N ranks are goroutines (GOMPJ_NP=N).

With -nodes K the job has K node processes on this box; with -hosts or -hostfile one node process per host, started
with "ssh -o BatchMode=yes HOST env VAR=... PROGRAM args" (the program must exist at the same path on every host,
e.g. on a shared file system; a package built by gompj run goes to $TMPDIR, which must then be shared). The launcher
runs the job's coordinator itself and makes a random job secret, handed to local node processes in their
environment and to remote ones over ssh's standard input, never on a command line. Output lines are forwarded
whole; the exit status is the worst of the node processes; Ctrl-C stops every node process.`}
}

// target works out the node processes of a job from the flags.
func (o *runOpts) target() (nodes int, hosts []string, err error) {
	if o.envErr != nil {
		return 0, nil, o.envErr
	}
	for _, name := range unknownVariables(os.Environ()) {
		fmt.Fprintf(os.Stderr, "gompj: warning: %s is not a gompj variable (misspelt? see gompj help env)\n", name)
	}
	if err := node.CheckDevice(o.dev); err != nil {
		return 0, nil, err
	}
	if o.hosts != "" && o.hostfile != "" {
		return 0, nil, errors.New("-hosts and -hostfile exclude each other")
	}
	if o.hosts != "" {
		for _, h := range strings.Split(o.hosts, ",") {
			if h = strings.TrimSpace(h); h != "" {
				hosts = append(hosts, h)
			}
		}
	}
	if o.hostfile != "" {
		f, err := os.Open(o.hostfile)
		if err != nil {
			return 0, nil, err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line, _, _ := strings.Cut(sc.Text(), "#")
			if f := strings.Fields(line); len(f) > 0 {
				hosts = append(hosts, f[0])
			}
		}
		if err := sc.Err(); err != nil {
			return 0, nil, err
		}
		if len(hosts) == 0 {
			return 0, nil, fmt.Errorf("no hosts in %s", o.hostfile)
		}
	}
	if o.np <= 0 {
		return 0, nil, errors.New("-np N is required (N > 0)")
	}
	nodes = o.nodes
	switch {
	case len(hosts) > 0 && nodes > 0:
		return 0, nil, errors.New("-nodes and -hosts exclude each other")
	case len(hosts) > 0:
		nodes = len(hosts)
	case nodes == 0 && o.rpn > 0:
		nodes = node.NodesFor(o.np, o.rpn)
	case nodes == 0:
		nodes = 1
	}
	if _, err := node.NewLayout(o.np, nodes, o.rpn); err != nil {
		return 0, nil, err
	}
	if err := node.NetworkMissing(); err != nil && nodes > 1 && len(hosts) == 0 {
		return 0, nil, err // the node processes would be started here, and would all refuse (-hosts may be Linux)
	}
	return nodes, hosts, nil
}

func (o *runOpts) launch(program string, args []string) *launch {
	l := &launch{np: o.np, rpn: o.rpn, dev: o.dev, ssh: splitWords(o.ssh), iface: o.iface, timeout: o.timeout,
		program: program, args: args, stdout: os.Stdout, stderr: os.Stderr}
	switch {
	case o.prefixNode:
		l.prefix = "node"
	case o.prefix:
		l.prefix = "ranks"
	}
	return l
}

func runCmd(args []string) int {
	var o runOpts
	fs := runFlags(&o)
	if code, ok := fs.parse("run", args, true); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "gompj run: no PROGRAM")
		fs.printHelp(os.Stderr)
		return 2
	}
	nodes, hosts, err := o.target()
	if err != nil {
		fmt.Fprintf(os.Stderr, "gompj run: %v\n", err)
		return 2
	}
	var tags []string
	if o.dev == node.DevRDMA {
		tags = []string{"-tags", "ofi"} // a package built here must have the device its node processes will open
	}
	prog, cleanup, err := resolveProgram(fs.Arg(0), tags...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gompj run: %v\n", err)
		return 1
	}
	defer cleanup()
	l := o.launch(prog, fs.Args()[1:])
	l.nodes, l.hosts = nodes, hosts
	if nodes == 1 && len(hosts) == 0 {
		return l.runOne()
	}
	return l.runMulti()
}

// resolveProgram returns an executable for PROGRAM: an executable file as is, a command found in PATH (a bare
// name), else a Go package (path or directory) built (with flags) into a temporary directory, which cleanup
// removes.
func resolveProgram(p string, flags ...string) (string, func(), error) {
	none := func() {}
	if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
		if st.Mode().Perm()&0o111 == 0 && runtime.GOOS != "windows" { // Windows has no execute bits
			return "", none, fmt.Errorf("%s is not executable", p)
		}
		abs, err := filepath.Abs(p)
		return abs, none, err
	}
	isDir := false
	if st, err := os.Stat(p); err == nil && st.IsDir() {
		isDir = true
	}
	if !isDir && !strings.ContainsAny(p, "/.") {
		if path, err := exec.LookPath(p); err == nil {
			return path, none, nil
		}
	}
	pkg := p
	if isDir && !filepath.IsAbs(p) && !strings.HasPrefix(p, ".") {
		pkg = "./" + p
	}
	dir, err := os.MkdirTemp("", "gompj-build-")
	if err != nil {
		return "", none, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	name := filepath.Base(strings.TrimSuffix(p, "/"))
	if name == "." || name == "/" || name == "" {
		name = "program"
	}
	out := filepath.Join(dir, name)
	if runtime.GOOS == "windows" {
		out += ".exe" // Windows runs a file without an extension as if it were NAME.exe
	}
	cmd := exec.Command("go", append(append([]string{"build"}, flags...), "-o", out, pkg)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		cleanup()
		return "", none, fmt.Errorf("building %s: %w", p, err)
	}
	return out, cleanup, nil
}

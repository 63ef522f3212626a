package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/gompj/gompj"
	"github.com/gompj/gompj/bench"
	"github.com/gompj/gompj/node"
)

func init() {
	register(&command{name: "bench", summary: "OSU-style benchmarks (latency, bw, bibw, mbw_mr, latency-any, collectives, view, halo)",
		usage: func(w io.Writer) { f, _ := benchFlags(new(runOpts), new(benchOpts)); f.printHelp(w) }, run: benchCmd})
	register(&command{name: "bench-node", hidden: true, run: benchNodeCmd,
		usage: func(w io.Writer) { fmt.Fprintln(w, "internal: the node program of `gompj bench -nodes`") }})
}

type benchOpts struct {
	sizes   string
	iters   int
	warmup  int
	window  int
	algo    string
	json    bool
	compute string
	alloc   bool
}

func (b *benchOpts) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&b.sizes, "sizes", "", "message sizes: comma-separated, K/M/G suffixes, or lo:hi powers of two (default: the benchmark's)")
	fs.IntVar(&b.iters, "iters", 0, "timed iterations per size (default: OSU's)")
	fs.IntVar(&b.warmup, "warmup", 0, "untimed iterations per size (default: OSU's)")
	fs.IntVar(&b.window, "window", 64, "bandwidth window")
	fs.StringVar(&b.algo, "algo", "", "collective algorithm to force")
	fs.BoolVar(&b.json, "json", false, "print JSON instead of OSU's text")
	fs.StringVar(&b.compute, "compute", "busy", "overlap benchmarks (i...): the computation, busy (OSU's spinning loop) or idle (a sleep: the cores stay free)")
	fs.BoolVar(&b.alloc, "alloc", false, "buffers from gompj.Alloc (shared with the node processes of the host) instead of make")
}

// args turns the options back into flags for the node processes of a multi-node benchmark.
func (b *benchOpts) args() []string {
	a := []string{"-iters", strconv.Itoa(b.iters), "-warmup", strconv.Itoa(b.warmup), "-window", strconv.Itoa(b.window),
		"-algo", b.algo, "-json=" + strconv.FormatBool(b.json), "-compute", b.compute, "-alloc=" + strconv.FormatBool(b.alloc)}
	if b.sizes != "" {
		a = append(a, "-sizes", b.sizes)
	}
	return a
}

func (b *benchOpts) options() (bench.Options, error) {
	o := bench.Options{Iters: b.iters, Warmup: b.warmup, Window: b.window, Algo: b.algo, JSON: b.json,
		Compute: b.compute, Alloc: b.alloc}
	if b.compute != "busy" && b.compute != "idle" {
		return o, fmt.Errorf("-compute %q: want busy or idle", b.compute)
	}
	if b.sizes != "" {
		s, err := bench.ParseSizes(b.sizes)
		if err != nil {
			return o, err
		}
		o.Sizes = s
	}
	return o, nil
}

func benchFlags(o *runOpts, b *benchOpts) (*flagSet, *flag.FlagSet) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	o.addFlags(fs, 2)
	b.addFlags(fs)
	return &flagSet{FlagSet: fs, synopsis: "gompj bench NAME [-np 2] [-nodes K | -hosts ...] [-ranks-per-node K] [-sizes ...] [-iters N] [-window W] [-algo A] [-compute busy|idle] [-alloc] [-json]",
		extra: "NAME is one of: " + strings.Join(bench.Names(), ", ") + `.
Point-to-point benchmarks measure between ranks 0 and 1 (with -nodes 2 -np 2 they are on different node processes;
with -nodes 2 -np 4 both are on node 0), except mbw_mr, osu_mbw_mr: every rank i < np/2 streams windows to
rank i+np/2 at once and rank 0 prints the pairs' total MB/s and messages per second. latency-any is latency with the
receiver using AnySource: compare it with latency. Rank 0 prints OSU's format: "# Size  Latency (us)" or
"# Size  Bandwidth (MB/s)". The overlap benchmarks of the nonblocking collectives (ibarrier, ibcast, ...
ireduce_scatter) print OSU's "# Size  Overall(us)  Compute(us)  Pure Comm.(us)  Overlap(%)": the collective is
started, the rank computes for as long as the collective alone takes (-compute busy: a spinning loop; idle: a
sleep), then waits; -algo forces the nonblocking algorithm (GOMPJ_OVERLAP=1 trades the pure time for more
overlap, and GOMPJ_BIND=cores binds node processes that share a host). view ping-pongs 4096 blocks of SIZE bytes 8 KiB apart
as a Vector view, against the same bytes contiguous and packed by hand (SIZE 8: a column); halo times a 2D halo
exchange of SIZE bytes per neighbour by NeighborAlltoall, its persistent form and Isend/Irecv/Waitall. -alloc
takes the buffers of latency, bw, bibw, mbw_mr and the collectives from gompj.Alloc, which node processes of one
host copy straight between mappings.`}, fs
}

func benchCmd(args []string) int {
	var o runOpts
	var b benchOpts
	f, fs := benchFlags(&o, &b)
	// NAME may come first (gompj bench latency -np 2) or after the flags.
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if code, ok := f.parse("bench", args, false); !ok {
		return code
	}
	if name == "" && fs.NArg() > 0 {
		name = fs.Arg(0)
	}
	if name == "" || bench.Get(name) == nil {
		fmt.Fprintf(os.Stderr, "gompj bench: no benchmark %q (have %s)\n", name, strings.Join(bench.Names(), ", "))
		return 2
	}
	opts, err := b.options()
	if err != nil {
		fmt.Fprintf(os.Stderr, "gompj bench: %v\n", err)
		return 2
	}
	nodes, hosts, err := o.target()
	if err != nil {
		fmt.Fprintf(os.Stderr, "gompj bench: %v\n", err)
		return 2
	}
	if nodes == 1 && len(hosts) == 0 {
		err := gompj.RunWith(gompj.Config{Ranks: o.np, Nodes: 1}, func(c *gompj.Comm) error {
			return bench.Run(c, name, opts, os.Stdout)
		})
		if err != nil {
			fmt.Fprintf(os.Stderr, "gompj bench: %v\n", err)
			return node.ExitCode(err)
		}
		return 0
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "gompj bench: %v\n", err)
		return 1
	}
	l := o.launch(self, append([]string{"bench-node", name}, b.args()...))
	l.nodes, l.hosts = nodes, hosts
	return l.runMulti()
}

// benchNodeCmd is one node process of a multi-node benchmark; the launcher set its environment.
func benchNodeCmd(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "gompj bench-node: no benchmark")
		return 2
	}
	name := args[0]
	var b benchOpts
	fs := flag.NewFlagSet("bench-node", flag.ContinueOnError)
	b.addFlags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	opts, err := b.options()
	if err != nil {
		fmt.Fprintf(os.Stderr, "gompj bench-node: %v\n", err)
		return 2
	}
	err = gompj.Run(func(c *gompj.Comm) error { return bench.Run(c, name, opts, os.Stdout) })
	if err != nil {
		fmt.Fprintf(os.Stderr, "gompj bench: %v\n", err)
		return node.ExitCode(err)
	}
	return 0
}

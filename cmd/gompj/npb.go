package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"

	"github.com/gompj/gompj"
	"github.com/gompj/gompj/node"
	"github.com/gompj/gompj/npb"
	"github.com/gompj/gompj/npb/sweep"
)

func init() {
	register(&command{name: "npb", summary: "NAS Parallel Benchmark kernels (EP, IS, CG, MG, FT); sweeps and charts",
		usage: func(w io.Writer) { f, _ := npbFlags(new(runOpts), new(npbOpts)); f.printHelp(w) }, run: npbCmd})
	register(&command{name: "npb-node", hidden: true, run: npbNodeCmd,
		usage: func(w io.Writer) { fmt.Fprintln(w, "internal: the node program of `gompj npb -nodes`") }})
}

// npbOpts are the flags of one kernel run that the node processes need too.
type npbOpts struct {
	class string
	json  bool
}

func (n *npbOpts) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&n.class, "class", "S", "problem class: S, W, A, B or C")
	fs.BoolVar(&n.json, "json", false, "print the result as one line of JSON instead of NPB's report")
}

func npbFlags(o *runOpts, n *npbOpts) (*flagSet, *flag.FlagSet) {
	fs := flag.NewFlagSet("npb", flag.ContinueOnError)
	o.addFlags(fs, 1)
	n.addFlags(fs)
	return &flagSet{FlagSet: fs,
		synopsis: "gompj npb KERNEL [-class S] [-np 1] [-nodes K | -hosts h1,h2 | -hostfile F] [-ranks-per-node K] [-json]\n" +
			"       gompj npb sweep -kernel CG,MG -class A -np 1,2,4,8 -modes onenode,nodes=2,pure -out DIR [-ref ref.csv] [-repeat N]\n" +
			"       gompj npb plot -in DIR/results.csv [-ref ref.csv] -out DIR",
		extra: "KERNEL is one of " + strings.Join(npb.KernelNames(), ", ") + `. IS, CG, MG and FT need a power-of-two -np
(and at most a class-dependent maximum); EP takes any. Rank 0 prints NPB's report, with a Layout line such as
"2 nodes x 4 ranks per node (tcp)"; -json prints the same as one line of JSON (what sweep reads). The exit status
is 0 when the kernel verified, 1 when it did not or the job failed, 2 for bad usage.

gompj npb sweep runs every kernel x class x np x mode as a fresh process of this gompj binary and writes
DIR/results.csv and, per kernel and class, Mop/s and speedup charts (PNG and SVG); gompj npb sweep -h documents its flags.
gompj npb plot redraws the charts from a results CSV (gompj npb plot -h).`}, fs
}

func npbCmd(args []string) int {
	if len(args) > 0 {
		switch args[0] {
		case "sweep":
			return npbSweepCmd(args[1:])
		case "plot":
			return npbPlotCmd(args[1:])
		}
	}
	var o runOpts
	var n npbOpts
	f, fs := npbFlags(&o, &n)
	// KERNEL may come first (gompj npb CG -np 4) or after the flags.
	var kernel string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		kernel, args = args[0], args[1:]
	}
	if code, ok := f.parse("npb", args, false); !ok {
		return code
	}
	if kernel == "" && fs.NArg() > 0 {
		kernel = fs.Arg(0)
	}
	if kernel == "" {
		fmt.Fprintf(os.Stderr, "gompj npb: no KERNEL (one of %s)\n", strings.Join(npb.KernelNames(), ", "))
		return 2
	}
	kernel = strings.ToUpper(kernel)
	class, err := parseClass(n.class)
	if err == nil {
		err = npb.Allowed(kernel, class, o.np)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "gompj npb: %s\n", strings.TrimPrefix(err.Error(), "npb: "))
		return 2
	}
	nodes, hosts, err := o.target()
	if err != nil {
		fmt.Fprintf(os.Stderr, "gompj npb: %v\n", err)
		return 2
	}
	if nodes == 1 && len(hosts) == 0 {
		return newNPBJob(kernel, class, o.dev, n.json).start(gompj.Config{Ranks: o.np, Nodes: 1})
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "gompj npb: %v\n", err)
		return 1
	}
	l := o.launch(self, []string{"npb-node", kernel, "-class", string(class), "-json=" + fmt.Sprint(n.json), "-dev", o.dev})
	l.nodes, l.hosts = nodes, hosts
	return l.runMulti()
}

// npbNodeCmd is one node process of a multi-node kernel run; the launcher set its environment and checked the
// arguments.
func npbNodeCmd(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "gompj npb-node: no kernel")
		return 2
	}
	kernel := args[0]
	var n npbOpts
	var dev string
	fs := flag.NewFlagSet("npb-node", flag.ContinueOnError)
	n.addFlags(fs)
	fs.StringVar(&dev, "dev", "tcp", "inter-node device")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	class, err := parseClass(n.class)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gompj npb-node: %v\n", err)
		return 2
	}
	return newNPBJob(kernel, class, dev, n.json).start(gompj.Config{})
}

// npbJob is one kernel run on this process's ranks.
type npbJob struct {
	kernel         string
	class          byte
	dev            string // the device between nodes, for the layout line
	json           bool
	stdout, stderr io.Writer
	// run runs the kernel on every rank (npb.Run; tests substitute it).
	run func(c *gompj.Comm, kernel string, class byte) (*npb.Result, error)
}

func newNPBJob(kernel string, class byte, dev string, asJSON bool) *npbJob {
	return &npbJob{kernel: kernel, class: class, dev: dev, json: asJSON, stdout: os.Stdout, stderr: os.Stderr, run: npb.Run}
}

// start runs the job on this process's ranks (cfg, completed from the environment) and returns the exit status:
// 0 verified, 1 not verified or failed, 2 refused by the kernel.
func (j *npbJob) start(cfg gompj.Config) int {
	var verified atomic.Bool
	err := gompj.RunWith(cfg, func(c *gompj.Comm) error {
		res, err := j.run(c, j.kernel, j.class)
		if err != nil {
			return err
		}
		lay, err := npb.LayoutOf(c, j.dev)
		if err != nil {
			return err
		}
		// Every rank holds the same result, so every node process knows the verdict and exits with it.
		verified.Store(res.Verified)
		if c.Rank() != 0 {
			return nil
		}
		if j.json {
			return sweep.NewReport(res, lay).WriteJSON(j.stdout)
		}
		res.Report(j.stdout, lay.String())
		if !res.Verified {
			fmt.Fprintf(j.stderr, "gompj npb: %s class %c on %d ranks did not verify\n", res.Kernel, res.Class, res.NP)
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(j.stderr, "gompj npb: %v\n", err)
		if errors.Is(err, npb.ErrProcs) || errors.Is(err, npb.ErrClass) || errors.Is(err, npb.ErrKernel) {
			return 2
		}
		return node.ExitCode(err)
	}
	if !verified.Load() {
		return 1
	}
	return 0
}

func parseClass(s string) (byte, error) {
	s = strings.ToUpper(strings.TrimSpace(s))
	if len(s) != 1 || !strings.Contains("SWABC", s) {
		return 0, fmt.Errorf("%w %q (want S, W, A, B or C)", npb.ErrClass, s)
	}
	return s[0], nil
}

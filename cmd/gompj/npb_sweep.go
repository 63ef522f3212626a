package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gompj/gompj/npb"
	"github.com/gompj/gompj/npb/sweep"
)

type sweepOpts struct {
	kernels, classes, nps, modes string
	out, ref, label              string
	repeat                       int
	runTimeout                   time.Duration
}

func sweepFlags(s *sweepOpts) *flagSet {
	fs := flag.NewFlagSet("npb sweep", flag.ContinueOnError)
	fs.StringVar(&s.kernels, "kernel", strings.Join(npb.KernelNames(), ","), "kernels, comma-separated")
	fs.StringVar(&s.classes, "class", "A", "classes, comma-separated")
	fs.StringVar(&s.nps, "np", "1,2,4", "process counts, comma-separated")
	fs.StringVar(&s.modes, "modes", "onenode", "placements, comma-separated: onenode, nodes=K, pure (one rank per process), rpn=K (K ranks per process)")
	fs.StringVar(&s.out, "out", "", "directory for results.csv and the charts (created; required)")
	fs.StringVar(&s.ref, "ref", "", "reference CSV (same columns) drawn on the charts as its own series")
	fs.StringVar(&s.label, "label", "gompj", "label prefix of this sweep's series (\"gompj onenode\", ...)")
	fs.IntVar(&s.repeat, "repeat", 1, "runs per configuration; the fastest is kept, verified only if every run was")
	fs.DurationVar(&s.runTimeout, "run-timeout", time.Hour, "longest one run may take before it is stopped")
	return &flagSet{FlagSet: fs,
		synopsis: "gompj npb sweep [-kernel EP,IS,CG,MG,FT] [-class A] [-np 1,2,4] [-modes onenode,nodes=2,pure] -out DIR [-ref ref.csv] [-repeat N]",
		extra: `Every configuration runs as a fresh process: "gompj npb KERNEL -class C -np N [-nodes K] -json". A configuration
NPB does not allow (e.g. CG on 3 ranks) or a mode cannot place (nodes=2 with np=1) is skipped and said so.
DIR/results.csv has the columns ` + strings.Join(sweep.Columns, ",") + `;
per kernel and class, DIR/KERNEL_CLASS_mops.{png,svg} draws Mop/s total against np and
DIR/KERNEL_CLASS_speedup.{png,svg} the speedup, one series per mode and one per label of the reference CSV.
Speedup is measured from the series' np=1 run, else from the np=1 run of a series with the same first word of
its label (nodes=2 takes onenode's), else from the series' smallest np taken as ideal. Unverified runs are in the CSV but not on the charts. The exit
status is 1 if a run failed or did not verify.`}
}

func npbSweepCmd(args []string) int {
	var s sweepOpts
	fs := sweepFlags(&s)
	if code, ok := fs.parse("npb sweep", args, false); !ok {
		return code
	}
	cfg, err := s.config()
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var ref []sweep.Row
	if err == nil && s.ref != "" {
		ref, err = sweep.ReadCSVFile(s.ref)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "gompj npb sweep: %v\n", err)
		return 2
	}
	if err := os.MkdirAll(s.out, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "gompj npb sweep: %v\n", err)
		return 1
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "gompj npb sweep: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg.Run = execRunner(self, s.runTimeout)
	cfg.Log = os.Stdout
	rows, runErr := sweep.Run(ctx, cfg)
	csvPath := filepath.Join(s.out, "results.csv")
	if err := sweep.WriteCSVFile(csvPath, rows); err != nil {
		fmt.Fprintf(os.Stderr, "gompj npb sweep: %v\n", err)
		return 1
	}
	files, err := sweep.Plot(sweep.Merge(rows, ref), s.out)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gompj npb sweep: %v\n", err)
		return 1
	}
	fmt.Printf("wrote %s (%d rows) and %d charts in %s\n", csvPath, len(rows), len(files), s.out)
	if runErr != nil {
		fmt.Fprintf(os.Stderr, "gompj npb sweep: %v\n", runErr)
		return 1
	}
	return 0
}

func (s *sweepOpts) config() (sweep.Config, error) {
	cfg := sweep.Config{Repeat: s.repeat, Label: s.label}
	if s.out == "" {
		return cfg, errors.New("-out DIR is required")
	}
	if s.repeat < 1 {
		return cfg, fmt.Errorf("-repeat %d: want at least 1", s.repeat)
	}
	for _, k := range splitList(s.kernels) {
		k = strings.ToUpper(k)
		if err := npb.Allowed(k, 'S', 1); errors.Is(err, npb.ErrKernel) {
			return cfg, err
		}
		cfg.Kernels = append(cfg.Kernels, k)
	}
	for _, c := range splitList(s.classes) {
		b, err := parseClass(c)
		if err != nil {
			return cfg, err
		}
		cfg.Classes = append(cfg.Classes, string(b))
	}
	for _, n := range splitList(s.nps) {
		v, err := strconv.Atoi(n)
		if err != nil || v < 1 {
			return cfg, fmt.Errorf("-np: %q is not a positive integer", n)
		}
		cfg.NPs = append(cfg.NPs, v)
	}
	if len(cfg.Kernels) == 0 || len(cfg.Classes) == 0 || len(cfg.NPs) == 0 {
		return cfg, errors.New("-kernel, -class and -np must each name at least one value")
	}
	modes, err := sweep.ParseModes(s.modes)
	if err != nil {
		return cfg, err
	}
	cfg.Modes = modes
	return cfg, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// execRunner runs the gompj binary self as a child process per run. A run that outlives timeout, or a sweep
// that is interrupted, gets SIGTERM (the launcher then stops its node processes), then SIGKILL 10 s later.
func execRunner(self string, timeout time.Duration) sweep.Runner {
	return func(ctx context.Context, args []string) ([]byte, []byte, error) {
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		var so, se strings.Builder
		cmd := exec.CommandContext(ctx, self, args...)
		cmd.Stdout, cmd.Stderr = &so, &se
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = 10 * time.Second
		err := cmd.Run()
		if ctx.Err() != nil && err != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return []byte(so.String()), []byte(se.String()), err
	}
}

func npbPlotCmd(args []string) int {
	fs := flag.NewFlagSet("npb plot", flag.ContinueOnError)
	in := fs.String("in", "", "results CSV to draw (required)")
	ref := fs.String("ref", "", "reference CSV drawn as its own series")
	out := fs.String("out", "", "directory for the charts (default: that of -in)")
	f := &flagSet{FlagSet: fs, synopsis: "gompj npb plot -in DIR/results.csv [-ref ref.csv] [-out DIR]",
		extra: "Draws the charts gompj npb sweep draws, from a results CSV (e.g. after editing it, or with another reference)."}
	if code, ok := f.parse("npb plot", args, false); !ok {
		return code
	}
	if *in == "" {
		fmt.Fprintln(os.Stderr, "gompj npb plot: -in CSV is required")
		return 2
	}
	if *out == "" {
		*out = filepath.Dir(*in)
	}
	rows, err := sweep.ReadCSVFile(*in)
	var refRows []sweep.Row
	if err == nil && *ref != "" {
		refRows, err = sweep.ReadCSVFile(*ref)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "gompj npb plot: %v\n", err)
		return 2
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "gompj npb plot: %v\n", err)
		return 1
	}
	files, err := sweep.Plot(sweep.Merge(rows, refRows), *out)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gompj npb plot: %v\n", err)
		return 1
	}
	if len(files) == 0 {
		fmt.Fprintf(os.Stderr, "gompj npb plot: no verified rows with Mop/s in %s: nothing to draw\n", *in)
		return 1
	}
	fmt.Printf("wrote %d charts in %s\n", len(files), *out)
	return 0
}

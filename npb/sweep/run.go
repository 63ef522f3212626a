package sweep

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/gompj/gompj/npb"
)

// Mode is where the ranks of a run go.
type Mode struct {
	Name         string // as given: "onenode", "nodes=2", "pure", "rpn=4"
	Nodes        int    // nodes=K: K node processes
	Pure         bool   // one rank per node process
	RanksPerNode int    // rpn=K: K ranks per node process
}

// ParseModes parses a comma-separated list of modes:
//
//	onenode   one process, np goroutine ranks
//	nodes=K   K node processes on this box, the ranks spread evenly
//	pure      np node processes of one rank each (pure network)
//	rpn=K     K ranks per node process, as many processes as that takes
func ParseModes(s string) ([]Mode, error) {
	var modes []Mode
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		name, val, hasVal := strings.Cut(f, "=")
		m := Mode{Name: f}
		switch {
		case name == "onenode" && !hasVal:
			m.Nodes = 1
		case name == "pure" && !hasVal:
			m.Pure = true
		case (name == "nodes" || name == "rpn") && hasVal:
			k, err := strconv.Atoi(val)
			if err != nil || k < 1 {
				return nil, fmt.Errorf("mode %q: want a positive integer after %s=", f, name)
			}
			if name == "nodes" {
				m.Nodes = k
			} else {
				m.RanksPerNode = k
			}
		default:
			return nil, fmt.Errorf("unknown mode %q (want onenode, nodes=K, pure or rpn=K)", f)
		}
		modes = append(modes, m)
	}
	if len(modes) == 0 {
		return nil, errors.New("no mode given")
	}
	return modes, nil
}

// Args are the arguments of the gompj command that runs kernel at class on np ranks in mode m, printing its
// report as JSON; ok is false when the mode cannot place np ranks (fewer ranks than node processes).
func (m Mode) Args(kernel, class string, np int) (args []string, ok bool) {
	args = []string{"npb", kernel, "-class", class, "-np", strconv.Itoa(np), "-json"}
	switch {
	case m.Pure:
		return append(args, "-nodes", strconv.Itoa(np)), true
	case m.RanksPerNode > 0:
		return append(args, "-ranks-per-node", strconv.Itoa(m.RanksPerNode)), true
	case m.Nodes > 1:
		return append(args, "-nodes", strconv.Itoa(m.Nodes)), np >= m.Nodes
	}
	return args, true
}

// Runner runs the gompj command with args as a fresh process and returns its standard output and error. A
// non-zero exit is an error, but its output is returned all the same: a run that does not verify exits 1 after
// printing its report.
type Runner func(ctx context.Context, args []string) (stdout, stderr []byte, err error)

// Config is a sweep: every kernel × class × np × mode, each run Repeat times.
type Config struct {
	Kernels []string
	Classes []string
	NPs     []int
	Modes   []Mode
	Repeat  int    // runs per configuration (default 1); the row kept is the fastest
	Label   string // label prefix of the series, "gompj" by default: "gompj onenode", "gompj pure", ...
	Run     Runner
	Log     io.Writer // progress, one line per run (nil: none)
}

// Run runs the sweep and returns one row per configuration that produced a report, in the order run, labelled
// "LABEL MODE". A configuration NPB does not allow (npb.Allowed) or the mode cannot place is skipped with a line
// in the log. With Repeat > 1 the fastest run is kept, and the row is verified only if every run was. The error
// joins what went wrong with the runs that produced no report, and names every configuration that did not
// verify; the rows are valid all the same.
func Run(ctx context.Context, cfg Config) ([]Row, error) {
	if cfg.Run == nil {
		return nil, errors.New("sweep: no Runner")
	}
	if cfg.Repeat < 1 {
		cfg.Repeat = 1
	}
	if cfg.Label == "" {
		cfg.Label = "gompj"
	}
	logf := func(format string, a ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, format+"\n", a...)
		}
	}
	var rows []Row
	var errs []error
	for _, kernel := range cfg.Kernels {
		kernel = strings.ToUpper(kernel)
		for _, class := range cfg.Classes {
			class = strings.ToUpper(class)
			for _, np := range cfg.NPs {
				for _, m := range cfg.Modes {
					what := fmt.Sprintf("%s class %s np=%d %s", kernel, class, np, m.Name)
					if err := allowed(kernel, class, np); err != nil {
						logf("skip %s: %v", what, err)
						continue
					}
					args, ok := m.Args(kernel, class, np)
					if !ok {
						logf("skip %s: fewer ranks than node processes", what)
						continue
					}
					row, err := runConfig(ctx, cfg, args, what, logf)
					if err != nil {
						errs = append(errs, err)
						if ctx.Err() != nil {
							return rows, errors.Join(errs...)
						}
						continue
					}
					row.Label = cfg.Label + " " + m.Name
					rows = append(rows, row)
					if !row.Verified {
						errs = append(errs, fmt.Errorf("%s did not verify", what))
					}
				}
			}
		}
	}
	return rows, errors.Join(errs...)
}

func allowed(kernel, class string, np int) error {
	if len(class) != 1 {
		return fmt.Errorf("%w %q", npb.ErrClass, class)
	}
	return npb.Allowed(kernel, class[0], np)
}

// runConfig runs one configuration cfg.Repeat times and returns the fastest report's row.
func runConfig(ctx context.Context, cfg Config, args []string, what string, logf func(string, ...any)) (Row, error) {
	var best Row
	verified, have := true, false
	for i := range cfg.Repeat {
		stdout, stderr, runErr := cfg.Run(ctx, args)
		rep, err := ParseReport(stdout)
		if err != nil {
			msg := lastLines(strings.TrimSpace(string(stderr)), 12)
			if runErr != nil {
				err = fmt.Errorf("%w (%w)", err, runErr)
			}
			if msg != "" {
				err = fmt.Errorf("%w; its stderr:\n%s", err, msg)
			}
			logf("FAIL %s: %v", what, err)
			return Row{}, fmt.Errorf("%s (gompj %s): %w", what, strings.Join(args, " "), err)
		}
		status := "verified"
		if !rep.Verified {
			status = "NOT VERIFIED"
			for _, c := range rep.Checks {
				if !c.OK {
					status += fmt.Sprintf(" (%s computed %.13g, reference %.13g)", c.Name, c.Computed, c.Reference)
				}
			}
		}
		run := ""
		if cfg.Repeat > 1 {
			run = fmt.Sprintf(" run %d/%d", i+1, cfg.Repeat)
		}
		logf("%s%s: %.2f Mop/s, %.3f s, %s", what, run, rep.MopsTotal, rep.Time, status)
		verified = verified && rep.Verified
		if !have || faster(rep.Row, best) {
			best, have = rep.Row, true
		}
	}
	best.Verified = verified
	return best, nil
}

func faster(a, b Row) bool {
	if math.IsNaN(b.Time) {
		return !math.IsNaN(a.Time)
	}
	return a.Time < b.Time
}

// lastLines keeps the last n lines of s: the end of a failed run's stderr says why it failed.
func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) <= n {
		return s
	}
	return fmt.Sprintf("[... %d lines]\n%s", len(lines)-n, strings.Join(lines[len(lines)-n:], "\n"))
}

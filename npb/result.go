package npb

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/gompj/gompj"
	"github.com/gompj/gompj/node"
)

// Result is what a kernel reports. Every rank of the run gets the same
// Result (the time is the maximum over ranks).
type Result struct {
	Kernel      string  // "EP", "IS", "CG", "MG" or "FT"
	Class       byte    // 'S', 'W', 'A', 'B' or 'C'
	Size        string  // problem size as NPB prints it
	Iterations  int     // NPB's iteration count (0 for EP)
	Time        float64 // seconds of the timed region, max over ranks
	MopsTotal   float64 // official operation count / Time / 1e6
	MopsPerRank float64 // MopsTotal / NP
	NP          int     // number of ranks
	OpType      string  // NPB's "Operation type" line
	Verified    bool    // every check below passed

	// Checks lists the verification quantities: what was computed and the
	// official reference it was compared with.
	Checks []Check
}

// Check is one verification quantity.
type Check struct {
	Name      string
	Computed  float64
	Reference float64
	Tolerance float64 // allowed |computed-reference|/|reference|; 0 means exact
}

// Err is the relative error of the check.
func (c Check) Err() float64 {
	if c.Reference == 0 {
		return math.Abs(c.Computed)
	}
	return math.Abs((c.Computed - c.Reference) / c.Reference)
}

// OK tells whether the check passes; a NaN never passes.
func (c Check) OK() bool {
	e := c.Err()
	return e <= c.Tolerance // false for NaN
}

// Errors returned for requests NPB does not allow.
var (
	ErrKernel = errors.New("npb: unknown kernel")
	ErrClass  = errors.New("npb: unknown problem class")
	ErrProcs  = errors.New("npb: process count not allowed for this kernel")
)

// KernelNames lists the kernel names Run accepts.
func KernelNames() []string { return []string{"EP", "IS", "CG", "MG", "FT"} }

// Run runs the named kernel (EP, IS, CG, MG or FT, any case) at the given
// class on every rank of c.
func Run(c *gompj.Comm, kernel string, class byte) (*Result, error) {
	switch strings.ToUpper(kernel) {
	case "EP":
		return RunEP(c, class)
	case "IS":
		return RunIS(c, class)
	case "CG":
		return RunCG(c, class)
	case "MG":
		return RunMG(c, class)
	case "FT":
		return RunFT(c, class)
	}
	return nil, unknownKernel(kernel)
}

func unknownKernel(kernel string) error {
	return fmt.Errorf("%w %q (want one of %s)", ErrKernel, kernel, strings.Join(KernelNames(), ", "))
}

// Allowed tells, without running anything, whether Run accepts kernel at
// class on np ranks: nil, or an error wrapping ErrKernel, ErrClass or
// ErrProcs that says why. A launcher calls it before starting processes so
// that a bad request is refused at once with a clear message; it applies the
// same rules as the kernels themselves.
func Allowed(kernel string, class byte, np int) error {
	kernel = strings.ToUpper(kernel)
	if np <= 0 {
		return fmt.Errorf("%w: %s needs at least one rank, got %d", ErrProcs, kernel, np)
	}
	switch kernel {
	case "EP":
		if _, ok := epParams(class); !ok {
			return badClass(kernel, class)
		}
		return nil
	case "IS":
		p, ok := isParams(class)
		if !ok {
			return badClass(kernel, class)
		}
		if err := needPow2(kernel, np); err != nil {
			return err
		}
		if np > 1<<p.bucketsLog2 || np > 1<<(p.totalKeysLog2-2) {
			return fmt.Errorf("%w: IS class %c allows at most %d ranks", ErrProcs, class, min(1<<p.bucketsLog2, 1<<(p.totalKeysLog2-2)))
		}
		return nil
	case "CG":
		p, ok := cgParams(class)
		if !ok {
			return badClass(kernel, class)
		}
		if err := needPow2(kernel, np); err != nil {
			return err
		}
		if _, npcols := cgGridShape(np); npcols > p.na/4 {
			return fmt.Errorf("%w: CG class %c with %d ranks: the process grid is wider than the matrix allows", ErrProcs, class, np)
		}
		return nil
	case "MG":
		p, ok := mgParams(class)
		if !ok {
			return badClass(kernel, class)
		}
		if err := needPow2(kernel, np); err != nil {
			return err
		}
		pg := mgProcGrid(np)
		if max(mgLB, log2int(max(pg[0], pg[1], pg[2]))) >= log2int(p.n) {
			return fmt.Errorf("%w: MG class %c with %d ranks (grid %v) is finer than the problem", ErrProcs, class, np, pg)
		}
		return nil
	case "FT":
		p, ok := ftParams(class)
		if !ok {
			return badClass(kernel, class)
		}
		if err := needPow2(kernel, np); err != nil {
			return err
		}
		if np > p.ny || np > p.nz {
			return fmt.Errorf("%w: FT class %c allows at most %d ranks", ErrProcs, class, min(p.ny, p.nz))
		}
		return nil
	}
	return unknownKernel(kernel)
}

// Layout says how the ranks of a run were placed: on how many node
// processes, how many ranks each (MinRanks = MaxRanks unless the ranks do not
// divide evenly), and over which device the nodes talk ("shm" on one node).
type Layout struct {
	Nodes              int
	MinRanks, MaxRanks int
	Device             string
}

// LayoutOf finds the layout of c's ranks and the devices between its nodes:
// "shm" on one node, else those that some node process uses (Comm.Devices:
// "shm" between node processes of one host, "tcp" or "rdma" between hosts;
// "shm+tcp" for both), or netDevice (e.g. "tcp") if none says. Collective:
// every rank of c calls it and gets the same answer.
func LayoutOf(c *gompj.Comm, netDevice string) (Layout, error) {
	local, err := c.SplitNode()
	if err != nil {
		return Layout{}, err
	}
	n, leader := local.Size(), 0
	if local.Rank() == 0 {
		leader = 1
	}
	if err := local.Free(); err != nil {
		return Layout{}, err
	}
	nodes := []int{0}
	if err := c.Allreduce([]int{leader}, nodes, gompj.Sum); err != nil {
		return Layout{}, err
	}
	ext := []int{0, 0}
	if err := c.Allreduce([]int{n, -n}, ext, gompj.Max); err != nil {
		return Layout{}, err
	}
	l := Layout{Nodes: nodes[0], MinRanks: -ext[1], MaxRanks: ext[0], Device: netDevice}
	// Which devices serve the nodes: the union over the ranks, as a bit per name.
	used := []int{0}
	for _, d := range c.Devices() {
		if i := slices.Index(deviceNames, d); i >= 0 {
			used[0] |= 1 << i
		}
	}
	all := []int{0}
	if err := c.Allreduce(used, all, gompj.Bor); err != nil {
		return Layout{}, err
	}
	var names []string
	for i, d := range deviceNames {
		if all[0]&(1<<i) != 0 {
			names = append(names, d)
		}
	}
	switch {
	case l.Nodes == 1:
		l.Device = "shm"
	case len(names) > 0:
		l.Device = strings.Join(names, "+")
	}
	return l, nil
}

// deviceNames are the devices LayoutOf reports, in the order it lists them: node's names, which Comm.Devices gives.
var deviceNames = []string{node.DevSHM, node.DevTCP, node.DevRDMA}

// String is the report's layout line: "2 nodes x 4 ranks per node (tcp)".
func (l Layout) String() string {
	nodes := "nodes"
	if l.Nodes == 1 {
		nodes = "node"
	}
	per := fmt.Sprintf("%d ranks", l.MaxRanks)
	switch {
	case l.MinRanks != l.MaxRanks:
		per = fmt.Sprintf("%d-%d ranks", l.MinRanks, l.MaxRanks)
	case l.MaxRanks == 1:
		per = "1 rank"
	}
	return fmt.Sprintf("%d %s x %s per node (%s)", l.Nodes, nodes, per, l.Device)
}

// Report prints r in the NPB report format. layout describes how the ranks
// were placed, e.g. "1 node x 4 ranks (shm)".
func (r *Result) Report(w io.Writer, layout string) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("\n\n %s Benchmark Completed.\n", r.Kernel)
	p(" Class           = %24c\n", r.Class)
	p(" Size            = %24s\n", r.Size)
	p(" Iterations      = %24d\n", r.Iterations)
	p(" Time in seconds = %24.2f\n", r.Time)
	p(" Total processes = %24d\n", r.NP)
	if layout != "" {
		p(" Layout          = %24s\n", layout)
	}
	p(" Mop/s total     = %24.2f\n", r.MopsTotal)
	p(" Mop/s/process   = %24.2f\n", r.MopsPerRank)
	p(" Operation type  = %24s\n", r.OpType)
	if r.Verified {
		p(" Verification    =  SUCCESSFUL\n")
	} else {
		p(" Verification    =  UNSUCCESSFUL\n")
	}
	p(" Version         = %24s\n", "NPB 3.4 kernels, gompj")
	for _, c := range r.Checks {
		status := "ok"
		if !c.OK() {
			status = "FAILED"
		}
		if c.Tolerance == 0 {
			p("   %-12s computed = %22.0f  reference = %22.0f  %s\n", c.Name, c.Computed, c.Reference, status)
		} else {
			p("   %-12s computed = %22.13e  reference = %22.13e  rel.err = %9.3e  %s\n",
				c.Name, c.Computed, c.Reference, c.Err(), status)
		}
	}
}

// finish fills in the common fields once the timed region is over: the time
// becomes the maximum over ranks and the verification verdict is taken from
// the checks (all ranks compute the same checks).
func finish(c *gompj.Comm, r *Result, localTime, ops float64) error {
	send := []float64{localTime}
	recv := []float64{0}
	if err := c.Allreduce(send, recv, gompj.Max); err != nil {
		return err
	}
	r.Time = recv[0]
	r.NP = c.Size()
	if r.Time > 0 {
		r.MopsTotal = ops / r.Time / 1e6
	}
	r.MopsPerRank = r.MopsTotal / float64(r.NP)
	r.Verified = len(r.Checks) > 0
	for _, ch := range r.Checks {
		if !ch.OK() {
			r.Verified = false
		}
	}
	return nil
}

func isPow2(n int) bool { return n > 0 && n&(n-1) == 0 }

func log2int(n int) int {
	l := 0
	for (1 << l) < n {
		l++
	}
	return l
}

func needPow2(kernel string, np int) error {
	if !isPow2(np) {
		return fmt.Errorf("%w: %s needs a power of two, got %d ranks", ErrProcs, kernel, np)
	}
	return nil
}

func badClass(kernel string, class byte) error {
	return fmt.Errorf("%w %q for %s (want S, W, A, B or C)", ErrClass, class, kernel)
}

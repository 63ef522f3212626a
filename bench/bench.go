package bench

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/gompj/gompj"
)

// Options are the knobs every benchmark understands.
type Options struct {
	Sizes  []int  // message sizes in bytes; nil: the benchmark's defaults
	Iters  int    // timed iterations per size; 0: OSU's defaults (fewer for large messages)
	Warmup int    // untimed iterations per size; 0: OSU's defaults
	Window int    // bandwidth window (OSU: 64)
	Algo   string // collective algorithm to force, "" for the runtime's choice
	JSON   bool   // print JSON instead of OSU's text
	// Compute is the overlap benchmarks' computation: "busy" (OSU's: the rank spins on arithmetic) or "idle" (the
	// rank sleeps, as when its work runs on a GPU or it waits for I/O, and leaves the cores free); "" is busy.
	Compute string
	// Alloc takes the benchmark's buffers from gompj.Alloc instead of make (memory that node processes of one
	// host copy between mappings, see Alloc); latency, bw, bibw, mbw_mr and the collectives.
	Alloc bool
}

// Benchmark is one OSU-style benchmark.
type Benchmark struct {
	Name     string
	Title    string // OSU's first line, e.g. "OSU MPI Latency Test"
	Column   string // e.g. "Latency (us)"
	MinRanks int
	Sizes    []int // default sizes
	// Average prints the average of every rank's figure (collectives); otherwise rank 0's figure is printed.
	Average bool
	// Run measures one size on every rank of c and returns this rank's figure.
	Run func(c *gompj.Comm, size int, o *Options) (float64, error)
	// Columns, when set, makes the benchmark print several figures per size (OSU's overlap format): RunRow
	// measures them, and Run is not used. Each column is averaged over the ranks when Average is set; Derive, if
	// set, then recomputes figures from the averages (the overlap percentage).
	Columns []string
	RunRow  func(c *gompj.Comm, size int, o *Options) ([]float64, error)
	Derive  func(row []float64)
	// Note, if set, gives the header's second line (OSU's "[ pairs: 1 ] [ window size: 64 ]").
	Note func(np int, o *Options) string
}

var (
	mu       sync.Mutex
	registry = map[string]*Benchmark{}
)

// Register adds a benchmark; names are unique.
func Register(b *Benchmark) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[b.Name]; dup {
		panic("bench: duplicate benchmark " + b.Name)
	}
	registry[b.Name] = b
}

// Get returns the benchmark called name, or nil.
func Get(name string) *Benchmark {
	mu.Lock()
	defer mu.Unlock()
	return registry[name]
}

// Names lists the registered benchmarks.
func Names() []string {
	mu.Lock()
	defer mu.Unlock()
	var ns []string
	for n := range registry {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// Sizes returns 0 (if withZero), then the powers of two from 1 to max.
func Sizes(withZero bool, max int) []int {
	var s []int
	if withZero {
		s = append(s, 0)
	}
	for n := 1; n <= max; n *= 2 {
		s = append(s, n)
	}
	return s
}

// ParseSizes parses a comma-separated list of sizes, each a number with an optional K, M or G suffix (powers of
// 1024), or a range "lo:hi" of powers of two.
func ParseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if lo, hi, ok := strings.Cut(f, ":"); ok {
			a, err := parseSize(lo)
			if err != nil {
				return nil, err
			}
			b, err := parseSize(hi)
			if err != nil {
				return nil, err
			}
			if a == 0 {
				out = append(out, 0)
				a = 1
			}
			for n := a; n <= b; n *= 2 {
				out = append(out, n)
			}
			continue
		}
		n, err := parseSize(f)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no sizes in %q", s)
	}
	return out, nil
}

func parseSize(s string) (int, error) {
	mult := 1
	switch {
	case strings.HasSuffix(s, "K"), strings.HasSuffix(s, "k"):
		mult, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(s, "M"), strings.HasSuffix(s, "m"):
		mult, s = 1<<20, s[:len(s)-1]
	case strings.HasSuffix(s, "G"), strings.HasSuffix(s, "g"):
		mult, s = 1<<30, s[:len(s)-1]
	}
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil || n < 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n * mult, nil
}

// iterations returns OSU's defaults: more iterations and warm-up for small messages.
func (o *Options) iterations(size, small, large int) (iters, warmup int) {
	iters, warmup = small, small/10
	if size > 8192 {
		iters, warmup = large, large/10
	}
	if o.Iters > 0 {
		iters = o.Iters
	}
	if o.Warmup > 0 {
		warmup = o.Warmup
	}
	return iters, max(warmup, 1)
}

// Point is one printed line: one figure, or (Benchmark.Columns) several.
type Point struct {
	Size   int       `json:"size"`
	Value  float64   `json:"value"`
	Values []float64 `json:"values,omitempty"`
}

// Report is what a benchmark run prints as JSON.
type Report struct {
	Benchmark string  `json:"benchmark"`
	Ranks     int     `json:"ranks"`
	Unit      string  `json:"unit"`
	Points    []Point `json:"points"`
}

const tagCollect = gompj.MaxTag - 100

// Run runs benchmark name on every rank of c; rank 0 prints to out.
func Run(c *gompj.Comm, name string, o Options, out io.Writer) error {
	b := Get(name)
	if b == nil {
		return fmt.Errorf("no benchmark %q (have %s)", name, strings.Join(Names(), ", "))
	}
	if c.Size() < b.MinRanks {
		return fmt.Errorf("%s needs at least %d ranks, the job has %d", name, b.MinRanks, c.Size())
	}
	sizes := o.Sizes
	if sizes == nil {
		sizes = b.Sizes
	}
	if o.Window <= 0 {
		o.Window = 64
	}
	rep := Report{Benchmark: name, Ranks: c.Size(), Unit: b.Column}
	if b.Columns != nil {
		return runRows(c, b, sizes, &o, rep, out)
	}
	if c.Rank() == 0 && !o.JSON {
		fmt.Fprintf(out, "# %s (gompj)\n", b.Title)
		if b.Note != nil {
			fmt.Fprintf(out, "# %s\n", b.Note(c.Size(), &o))
		}
		fmt.Fprintf(out, "# Size%*s\n", 22, b.Column)
	}
	for _, size := range sizes {
		v, err := b.Run(c, size, &o)
		if err != nil {
			return fmt.Errorf("%s, %d bytes: %w", name, size, err)
		}
		if b.Average {
			if v, err = average(c, v); err != nil {
				return err
			}
		}
		if c.Rank() != 0 {
			continue
		}
		rep.Points = append(rep.Points, Point{Size: size, Value: v})
		if !o.JSON {
			fmt.Fprintf(out, "%-10d%18.2f\n", size, v)
		}
	}
	if c.Rank() == 0 && o.JSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return nil
}

// runRows runs a benchmark of several columns.
func runRows(c *gompj.Comm, b *Benchmark, sizes []int, o *Options, rep Report, out io.Writer) error {
	rep.Unit = strings.Join(b.Columns, ", ")
	if c.Rank() == 0 && !o.JSON {
		fmt.Fprintf(out, "# %s (gompj)\n", b.Title)
		if b.Note != nil {
			fmt.Fprintf(out, "# %s\n", b.Note(c.Size(), o))
		}
		fmt.Fprint(out, "# Size")
		for _, col := range b.Columns {
			fmt.Fprintf(out, "%*s", 18, col)
		}
		fmt.Fprintln(out)
	}
	for _, size := range sizes {
		row, err := b.RunRow(c, size, o)
		if err != nil {
			return fmt.Errorf("%s, %d bytes: %w", b.Name, size, err)
		}
		if b.Average {
			if err = averageRow(c, row); err != nil {
				return err
			}
			if b.Derive != nil {
				b.Derive(row)
			}
		}
		if c.Rank() != 0 {
			continue
		}
		rep.Points = append(rep.Points, Point{Size: size, Value: row[0], Values: row})
		if !o.JSON {
			fmt.Fprintf(out, "%-10d", size)
			for i, v := range row {
				w := 18
				if i == 0 {
					w = 12
				}
				fmt.Fprintf(out, "%*.2f", w, v)
			}
			fmt.Fprintln(out)
		}
	}
	if c.Rank() == 0 && o.JSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return nil
}

// average returns, on rank 0, the mean of every rank's v.
func average(c *gompj.Comm, v float64) (float64, error) {
	row := []float64{v}
	err := averageRow(c, row)
	return row[0], err
}

// averageRow replaces row, on rank 0, by the mean of every rank's row, column by column (point-to-point, so it
// needs no collective). Each rank's row travels as one message, received from each rank in turn: averaged a
// column at a time from any source, a rank that was ahead had sent its next column before a slower rank's figure
// for this one arrived, and columns mixed (the halo benchmark's first column read 20-40 % high).
func averageRow(c *gompj.Comm, row []float64) error {
	if c.Rank() != 0 {
		return c.Send(row, 0, tagCollect)
	}
	buf := make([]float64, len(row))
	for i := 1; i < c.Size(); i++ {
		if _, err := c.Recv(buf, i, tagCollect); err != nil {
			return err
		}
		for k, v := range buf {
			row[k] += v
		}
	}
	for k := range row {
		row[k] /= float64(c.Size())
	}
	return nil
}

// pageSize is the alignment of benchmark buffers, as OSU's posix_memalign gives them.
const pageSize = 4096

// buffer returns size bytes starting on a page of their own. Go's allocator packs small objects together (two 8-byte
// slices can share a 16-byte block), so two ranks' buffers would otherwise share a cache line and every message
// would pay for the false sharing, which the C benchmarks it is compared with never do.
// mem hands a benchmark its buffers: Go memory (buffer), or with Options.Alloc memory from gompj.Alloc, which
// free gives back once the size is measured. The first failure to allocate is kept in err.
type mem struct {
	c    *gompj.Comm
	lent bool
	bufs [][]byte
	flts [][]float64
	err  error
}

func newMem(c *gompj.Comm, o *Options) *mem { return &mem{c: c, lent: o.Alloc} }

func (m *mem) bytes(n int) []byte {
	if !m.lent {
		return buffer(n)
	}
	b, err := gompj.Alloc[byte](m.c, n)
	if err != nil {
		m.err = cmp.Or(m.err, err)
		return buffer(n)
	}
	fill(b)
	m.bufs = append(m.bufs, b)
	return b
}

func (m *mem) floats(n int) []float64 {
	f := []float64(nil)
	if m.lent {
		var err error
		if f, err = gompj.Alloc[float64](m.c, n); err != nil {
			m.err = cmp.Or(m.err, err)
		} else {
			m.flts = append(m.flts, f)
		}
	}
	if f == nil {
		f = make([]float64, n)
	}
	for i := range f {
		f[i] = 1 // written, as buffer's bytes are
	}
	return f
}

// free gives the lent buffers back, and reports a failure in *err if nothing failed before.
func (m *mem) free(err *error) {
	var errs []error
	for _, b := range m.bufs {
		errs = append(errs, gompj.Free(m.c, b))
	}
	for _, f := range m.flts {
		errs = append(errs, gompj.Free(m.c, f))
	}
	m.bufs, m.flts = nil, nil
	*err = cmp.Or(*err, errors.Join(errs...))
}

// buffer returns size bytes, page-aligned, filled as OSU fills its buffers. A buffer never written would read as
// the kernel's one zero page, always in cache: a copy from it costs no memory traffic, which flattered every copy
// made within a process (an alltoall of 8 MiB per pair on 4 goroutine ranks ran 2.5x faster from untouched buffers)
// and none made by another process, which faults real pages in.
func buffer(size int) []byte {
	b := make([]byte, size+2*pageSize)
	off := pageSize - int(uintptr(unsafe.Pointer(unsafe.SliceData(b)))%pageSize)
	b = b[off : off+size : off+size]
	fill(b)
	return b
}

// fill writes OSU's byte into every byte of b.
func fill(b []byte) {
	for i := range b {
		b[i] = 'a'
	}
}

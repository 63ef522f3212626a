package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/gompj/gompj"
)

func TestPointToPointBenchmarksPrintOSUFormat(t *testing.T) {
	for _, name := range []string{"latency", "bw", "bibw"} {
		var out bytes.Buffer
		err := gompj.RunWith(gompj.Config{Ranks: 2}, func(c *gompj.Comm) error {
			// 64 KiB, not 1 byte: a bandwidth of a few bytes per millisecond on a loaded box prints as 0.00 MB/s.
			return Run(c, name, Options{Sizes: []int{64 << 10, 1 << 20}, Iters: 3, Warmup: 1, Window: 4}, &out)
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 4 || !strings.HasPrefix(lines[1], "# Size") {
			t.Fatalf("%s printed:\n%s", name, out.String())
		}
		for _, l := range lines[2:] {
			var size int
			var v float64
			if n, _ := fmtSscan(l, &size, &v); n != 2 || v <= 0 {
				t.Fatalf("%s: bad line %q", name, l)
			}
		}
	}
}

func TestParseSizes(t *testing.T) {
	got, err := ParseSizes("0:4,1K,2M")
	if err != nil {
		t.Fatal(err)
	}
	want := []int{0, 1, 2, 4, 1024, 2 << 20}
	if len(got) != len(want) {
		t.Fatalf("got %v want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("got %v want %v", got, want)
		}
	}
	if _, err := ParseSizes("x"); err == nil {
		t.Fatal("bad size accepted")
	}
}

// TestViewAndHaloBenchmarks: the view and halo benchmarks run (the view one checks that the blocks arrived) and
// print a row of figures per size.
func TestViewAndHaloBenchmarks(t *testing.T) {
	for _, b := range []struct {
		name  string
		np    int
		sizes []int
		cols  int
	}{{"view", 2, []int{8, 64}, 5}, {"halo", 4, []int{8, 4096}, 4}} {
		var out bytes.Buffer
		err := gompj.RunWith(gompj.Config{Ranks: b.np}, func(c *gompj.Comm) error {
			return Run(c, b.name, Options{Sizes: b.sizes, Iters: 3, Warmup: 1}, &out)
		})
		if err != nil {
			t.Fatalf("%s: %v", b.name, err)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 2+len(b.sizes) || !strings.HasPrefix(lines[1], "# Size") {
			t.Fatalf("%s printed:\n%s", b.name, out.String())
		}
		for _, l := range lines[2:] {
			if f := strings.Fields(l); len(f) != 1+b.cols {
				t.Fatalf("%s: line %q has %d figures, want %d", b.name, l, len(f)-1, b.cols)
			}
		}
	}
	if _, err := viewRow(nil, 12, &Options{}); err == nil {
		t.Error("view accepted a block of 12 bytes")
	}
}

// TestMultiBandwidth runs osu_mbw_mr with one pair, and with two pairs and an idle odd rank, and checks OSU's
// format: the pairs and window line, both columns, and messages per second that agree with MB/s.
func TestMultiBandwidth(t *testing.T) {
	for _, np := range []int{2, 5} {
		var out bytes.Buffer
		err := gompj.RunWith(gompj.Config{Ranks: np}, func(c *gompj.Comm) error {
			return Run(c, "mbw_mr", Options{Sizes: []int{1, 64 << 10}, Iters: 3, Warmup: 1, Window: 8}, &out)
		})
		if err != nil {
			t.Fatalf("np=%d: %v", np, err)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 5 || lines[1] != fmt.Sprintf("# [ pairs: %d ] [ window size: 8 ]", np/2) ||
			!strings.HasPrefix(lines[2], "# Size") || !strings.HasSuffix(lines[2], "MB/s        Messages/s") {
			t.Fatalf("np=%d printed:\n%s", np, out.String())
		}
		for _, l := range lines[3:] {
			var size int
			var mbs, rate float64
			// MB/s may print as 0.00 at 1 byte on a loaded box (under 5000 messages/s): it must still agree with the
			// message rate, to the 0.01 it is printed to.
			if n, _ := fmtSscan(l, &size, &mbs, &rate); n != 3 || mbs < 0 || rate <= 0 ||
				math.Abs(rate*float64(size)/1e6-mbs) > 0.01*mbs+0.01 {
				t.Fatalf("np=%d: bad line %q", np, l)
			}
		}
	}
}

// TestBandwidthAllocations: the osu_bw and osu_mbw_mr loops allocate almost nothing per message, as their C
// counterparts do not; a loop that boxed its buffer into Irecv's interface argument at every call (Irecv's argument
// escapes: an object receive keeps it) allocated once per message.
func TestBandwidthAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, name := range []string{"bw", "mbw_mr"} {
		const iters, window = 1000, 64
		var before, after runtime.MemStats
		err := gompj.RunWith(gompj.Config{Ranks: 2}, func(c *gompj.Comm) error {
			o := Options{Sizes: []int{8}, Iters: 20, Warmup: 1, Window: window}
			if err := Run(c, name, o, io.Discard); err != nil { // warms the pools
				return err
			}
			if err := c.Barrier(); err != nil {
				return err
			}
			if c.Rank() == 0 {
				runtime.ReadMemStats(&before)
			}
			o.Iters = iters
			if err := Run(c, name, o, io.Discard); err != nil {
				return err
			}
			if err := c.Barrier(); err != nil {
				return err
			}
			if c.Rank() == 0 {
				runtime.ReadMemStats(&after)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		per := float64(after.Mallocs-before.Mallocs) / (iters * window)
		t.Logf("%s: %.3f allocations per message", name, per)
		if per > 0.3 {
			t.Errorf("%s: %.2f allocations per message", name, per)
		}
	}
}

var (
	registerAveraged sync.Once
	averagedColumns  = &Benchmark{Name: "test-averaged-columns", Title: "test", MinRanks: 1, Average: true,
		Sizes: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}, Columns: []string{"a", "b", "c", "b/a"},
		RunRow: func(c *gompj.Comm, size int, o *Options) ([]float64, error) {
			r := float64(c.Rank() + 1)
			return []float64{r, 10 * r, 100*r + float64(size), 0}, nil
		},
		Derive: func(row []float64) { row[3] = row[1] / row[0] }}
)

// TestAveragedColumns checks that a benchmark of several columns prints, per column, the mean of every rank's
// figure for that column. Ranks that finish a row early send all of its columns at once; averaged a column at a
// time from any source, the columns used to mix (the halo benchmark's first column read 20-40 % high).
func TestAveragedColumns(t *testing.T) {
	const np = 5
	sizes := averagedColumns.Sizes
	registerAveraged.Do(func() { Register(averagedColumns) })
	var out bytes.Buffer
	err := gompj.RunWith(gompj.Config{Ranks: np}, func(c *gompj.Comm) error {
		return Run(c, "test-averaged-columns", Options{JSON: true}, &out)
	})
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v in %s", err, out.String())
	}
	if len(rep.Points) != len(sizes) {
		t.Fatalf("%d rows, want %d", len(rep.Points), len(sizes))
	}
	for _, p := range rep.Points {
		want := []float64{3, 30, 300 + float64(p.Size), 10} // the mean of 1..5 is 3
		for k, v := range p.Values {
			if math.Abs(v-want[k]) > 1e-9 {
				t.Fatalf("size %d: columns %v, want %v", p.Size, p.Values, want)
			}
		}
	}
}

package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gompj/gompj"
)

// Every overlap benchmark prints OSU's overlap format, with both computations, and its JSON carries the four
// figures; the overlap is consistent with the times printed beside it.
func TestOverlapBenchmarksPrintOSUFormat(t *testing.T) {
	names := []string{"ibarrier", "ibcast", "ireduce", "iallreduce", "igather", "iscatter", "iallgather", "ialltoall",
		"ireduce_scatter"}
	for _, name := range names {
		for _, compute := range []string{"busy", "idle"} {
			var out bytes.Buffer
			err := gompj.RunWith(gompj.Config{Ranks: 3}, func(c *gompj.Comm) error {
				o := Options{Iters: 3, Warmup: 1, Compute: compute}
				if name != "ibarrier" {
					o.Sizes = []int{8, 100000}
				}
				return Run(c, name, o, &out)
			})
			if err != nil {
				t.Fatalf("%s -compute %s: %v", name, compute, err)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			want := 4
			if name == "ibarrier" {
				want = 3
			}
			if len(lines) != want || strings.Join(strings.Fields(lines[1]), " ") !=
				"# Size Overall(us) Compute(us) Pure Comm.(us) Overlap(%)" {
				t.Fatalf("%s printed:\n%s", name, out.String())
			}
			for _, l := range lines[2:] {
				var size int
				var overall, comp, pure, ov float64
				if n, err := fmtSscan(l, &size, &overall, &comp, &pure, &ov); n != 5 || err != nil {
					t.Fatalf("%s: line %q: %v", name, l, err)
				}
				if ov < 0 || ov > 100 || overall <= 0 || pure <= 0 || comp <= 0 {
					t.Errorf("%s: implausible line %q", name, l)
				}
			}
		}
	}
	var out bytes.Buffer
	err := gompj.RunWith(gompj.Config{Ranks: 2}, func(c *gompj.Comm) error {
		return Run(c, "iallreduce", Options{Iters: 2, Warmup: 1, Sizes: []int{64}, JSON: true}, &out)
	})
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || len(rep.Points) != 1 || len(rep.Points[0].Values) != 4 {
		t.Fatalf("JSON %s: %v", out.String(), err)
	}
	// a bad computation is an error, not a silent default
	err = gompj.RunWith(gompj.Config{Ranks: 1}, func(c *gompj.Comm) error {
		return Run(c, "ibarrier", Options{Iters: 1, Compute: "lazy"}, &bytes.Buffer{})
	})
	if err == nil || !strings.Contains(err.Error(), "lazy") {
		t.Fatalf("-compute lazy: %v", err)
	}
}

func TestOverlapPercent(t *testing.T) {
	for _, c := range []struct{ overall, compute, pure, want float64 }{
		{10, 10, 10, 100}, // all hidden
		{20, 10, 10, 0},   // nothing hidden
		{15, 10, 10, 50},
		{30, 10, 10, 0},  // worse than nothing: clamped
		{9, 10, 10, 100}, // better than all: clamped
		{5, 0, 0, 0},     // no communication to hide
	} {
		if got := overlapPercent(c.overall, c.compute, c.pure); got != c.want {
			t.Errorf("overlap(%v, %v, %v) = %v, want %v", c.overall, c.compute, c.pure, got, c.want)
		}
	}
}

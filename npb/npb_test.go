package npb

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/gompj/gompj"
)

// runKernel runs kernel at class on np goroutine ranks and returns rank 0's
// result.
func runKernel(t testing.TB, kernel string, class byte, np int) *Result {
	t.Helper()
	var mu sync.Mutex
	var res *Result
	err := gompj.RunWith(gompj.Config{Ranks: np}, func(c *gompj.Comm) error {
		r, err := Run(c, kernel, class)
		if err != nil {
			return err
		}
		if c.Rank() == 0 {
			mu.Lock()
			res = r
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s class %c np=%d: %v", kernel, class, np, err)
	}
	return res
}

func TestClassS(t *testing.T) {
	for _, k := range KernelNames() {
		for _, np := range []int{1, 2, 4} {
			t.Run(fmt.Sprintf("%s/np=%d", k, np), func(t *testing.T) {
				r := runKernel(t, k, 'S', np)
				var b bytes.Buffer
				r.Report(&b, fmt.Sprintf("1 node x %d ranks", np))
				if !r.Verified {
					t.Fatalf("not verified:\n%s", b.String())
				}
				if !strings.Contains(b.String(), " Verification    =  SUCCESSFUL") ||
					!strings.Contains(b.String(), " Mop/s total     =") {
					t.Fatalf("report lacks NPB lines:\n%s", b.String())
				}
				if r.NP != np || r.Class != 'S' || r.Kernel != k {
					t.Fatalf("bad header fields: %+v", r)
				}
			})
		}
	}
}

// Class A timings at np=1 (not run by go test; run with
//
//	go test ./npb -run XXX -bench ClassA -benchtime 1x
//
// and read the Mop/s metric, or use the gompj npb command).
func benchmarkClassA(b *testing.B, kernel string) {
	for i := 0; i < b.N; i++ {
		r := runKernel(b, kernel, 'A', 1)
		if !r.Verified {
			b.Fatalf("%s class A did not verify", kernel)
		}
		b.ReportMetric(r.MopsTotal, "Mop/s")
	}
}

func BenchmarkClassA_EP(b *testing.B) { benchmarkClassA(b, "EP") }
func BenchmarkClassA_IS(b *testing.B) { benchmarkClassA(b, "IS") }
func BenchmarkClassA_CG(b *testing.B) { benchmarkClassA(b, "CG") }
func BenchmarkClassA_MG(b *testing.B) { benchmarkClassA(b, "MG") }
func BenchmarkClassA_FT(b *testing.B) { benchmarkClassA(b, "FT") }

func TestDisallowedProcessCounts(t *testing.T) {
	for _, k := range []string{"IS", "CG", "MG", "FT"} {
		err := gompj.RunWith(gompj.Config{Ranks: 3}, func(c *gompj.Comm) error {
			_, err := Run(c, k, 'S')
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "power of two") {
			t.Fatalf("%s at np=3: got %v, want a power-of-two error", k, err)
		}
	}
}

// BenchmarkNPB times every kernel at the configurations the ANCHORS table
// compares with NPB's MPI reference (class A at np=1 and 2, class B at
// np=2) and at np beyond the core count (class A at np=16 and 64), one
// verified run per iteration. Select with e.g.
//
//	go test ./npb -run XXX -bench 'NPB/MG/B/np=2$' -benchtime 1x
func BenchmarkNPB(b *testing.B) {
	configs := []struct {
		class byte
		np    int
	}{{'A', 1}, {'A', 2}, {'B', 2}, {'A', 16}, {'A', 64}}
	for _, k := range KernelNames() {
		for _, cfg := range configs {
			b.Run(fmt.Sprintf("%s/%c/np=%d", k, cfg.class, cfg.np), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					r := runKernel(b, k, cfg.class, cfg.np)
					if !r.Verified {
						b.Fatalf("%s class %c np=%d did not verify", k, cfg.class, cfg.np)
					}
					b.ReportMetric(r.MopsTotal, "Mop/s")
				}
			})
		}
	}
}

package bench

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gompj/gompj"
)

func TestCollectiveBenchmarksPrintOSUFormat(t *testing.T) {
	for _, name := range []string{"barrier", "bcast", "reduce", "allreduce", "gather", "scatter", "allgather", "alltoall", "alltoallv", "reduce_scatter"} {
		for _, np := range []int{1, 3} {
			var out bytes.Buffer
			err := gompj.RunWith(gompj.Config{Ranks: np}, func(c *gompj.Comm) error {
				o := Options{Iters: 3, Warmup: 1}
				if name != "barrier" {
					o.Sizes = []int{8, 100000}
				}
				return Run(c, name, o, &out)
			})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			want := 4
			if name == "barrier" {
				want = 3
			}
			if len(lines) != want || !strings.HasPrefix(lines[1], "# Size") || !strings.Contains(lines[1], "Avg Latency(us)") {
				t.Fatalf("%s printed:\n%s", name, out.String())
			}
			if name == "barrier" && !strings.HasPrefix(lines[2], "0 ") {
				t.Fatalf("barrier line %q", lines[2])
			}
		}
	}
}

func benchColl(b *testing.B, np int, name string, size int) {
	err := gompj.RunWith(gompj.Config{Ranks: np}, func(c *gompj.Comm) error {
		err := Run(c, name, Options{Sizes: []int{size}, Iters: b.N, Warmup: 10}, &bytes.Buffer{})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
}

func BenchmarkCollBarrier2(b *testing.B)   { benchColl(b, 2, "barrier", 0) }
func BenchmarkCollAllreduce2(b *testing.B) { benchColl(b, 2, "allreduce", 8) }

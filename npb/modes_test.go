package npb

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/gompj/gompj"
	"github.com/gompj/gompj/internal/harness"
)

// verifyBody runs kernel at class S and fails the rank unless it verified and the ranks are placed as want says.
func verifyBody(kernel string, want Layout) func(c *gompj.Comm) error {
	return func(c *gompj.Comm) error {
		r, err := Run(c, kernel, 'S')
		if err != nil {
			return err
		}
		got, err := LayoutOf(c, "tcp")
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("layout %q, want %q", got, want)
		}
		if r.NP != c.Size() || r.Kernel != kernel || r.Class != 'S' {
			return fmt.Errorf("result header %s class %c np=%d on %d ranks", r.Kernel, r.Class, r.NP, c.Size())
		}
		if !r.Verified {
			var b bytes.Buffer
			r.Report(&b, got.String())
			return fmt.Errorf("rank %d: %s class S did not verify:%s", c.Rank(), kernel, b.String())
		}
		return nil
	}
}

// Class S of every kernel, 4 ranks, on several node processes (3 nodes: ranks 0-1, 2, 3, so every kernel's
// exchanges mix a process's memory and the network), with one rank per node process (pure network), on the same 3
// node processes sharing the host's memory, and, in builds with -tags ofi, on 3 node processes over the rdma device
// (libfabric's tcp provider). The layout names the device each way used. One node is
// TestClassS; here it only checks the layout line.
func TestModesClassS(t *testing.T) {
	for _, k := range KernelNames() {
		t.Run(k, func(t *testing.T) {
			t.Run("nodes", func(t *testing.T) {
				harness.Procs(t, harness.Spec{Ranks: 4, Nodes: 3}, verifyBody(k, Layout{Nodes: 3, MinRanks: 1, MaxRanks: 2, Device: "tcp"})).Check(t)
			})
			t.Run("pure", func(t *testing.T) {
				harness.Procs(t, harness.Spec{Ranks: 4, Nodes: 4}, verifyBody(k, Layout{Nodes: 4, MinRanks: 1, MaxRanks: 1, Device: "tcp"})).Check(t)
			})
			t.Run("shm", func(t *testing.T) { // as nodes, the node processes sharing memory
				harness.Procs(t, harness.Spec{Ranks: 4, Nodes: 3, HostSHM: true}, verifyBody(k, Layout{Nodes: 3, MinRanks: 1, MaxRanks: 2, Device: "shm"})).Check(t)
			})
			t.Run("ofi", func(t *testing.T) { // as nodes, over the rdma device on libfabric (-tags ofi)
				harness.SkipWithoutOFI(t)
				harness.Procs(t, harness.Spec{Ranks: 4, Nodes: 3, Env: harness.OFIEnv()}, verifyBody(k, Layout{Nodes: 3, MinRanks: 1, MaxRanks: 2, Device: "rdma"})).Check(t)
			})
		})
	}
}

func TestLayoutOneNode(t *testing.T) {
	want := Layout{Nodes: 1, MinRanks: 3, MaxRanks: 3, Device: "shm"}
	err := gompj.RunWith(gompj.Config{Ranks: 3, Nodes: 1}, func(c *gompj.Comm) error {
		got, err := LayoutOf(c, "tcp")
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("layout %+v, want %+v", got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestLayoutString(t *testing.T) {
	for _, c := range []struct {
		l    Layout
		want string
	}{
		{Layout{1, 4, 4, "shm"}, "1 node x 4 ranks per node (shm)"},
		{Layout{2, 1, 1, "tcp"}, "2 nodes x 1 rank per node (tcp)"},
		{Layout{3, 2, 3, "tcp"}, "3 nodes x 2-3 ranks per node (tcp)"},
	} {
		if got := c.l.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.l, got, c.want)
		}
	}
}

// Allowed must say what the kernels say: a launcher refuses with it what the kernel would refuse after starting
// every process.
func TestAllowedAgreesWithKernels(t *testing.T) {
	type cfg struct {
		kernel string
		class  byte
		np     int
	}
	refused := []cfg{
		{"IS", 'S', 3}, {"CG", 'S', 3}, {"MG", 'S', 6}, {"FT", 'S', 5},
		{"FT", 'S', 128},  // more ranks than planes
		{"IS", 'S', 1024}, // more ranks than buckets
		{"MG", 'X', 2}, {"EP", 'Z', 1},
	}
	for _, c := range refused {
		want := Allowed(c.kernel, c.class, c.np)
		if want == nil {
			t.Errorf("Allowed(%s, %c, %d) = nil, want a refusal", c.kernel, c.class, c.np)
			continue
		}
		err := gompj.RunWith(gompj.Config{Ranks: c.np, Nodes: 1}, func(cm *gompj.Comm) error {
			_, err := Run(cm, c.kernel, c.class)
			return err
		})
		if !errors.Is(err, ErrProcs) && !errors.Is(err, ErrClass) {
			t.Errorf("%s class %c np=%d: Allowed refuses (%v) but the kernel says %v", c.kernel, c.class, c.np, want, err)
		}
	}
	// Accepted: np=1, 2, 4 run in TestClassS and TestModesClassS, np=8 here; the limits are accepted.
	for _, k := range KernelNames() {
		if err := Allowed(k, 'S', 8); err != nil {
			t.Fatalf("Allowed(%s, S, 8): %v", k, err)
		}
		if k == "EP" {
			continue // 8 ranks of EP class S take seconds on 2 cores; EP takes any count
		}
		r := runKernel(t, k, 'S', 8)
		if !r.Verified {
			t.Errorf("%s class S np=8 did not verify", k)
		}
	}
	for _, c := range []cfg{{"FT", 'S', 64}, {"IS", 'S', 512}, {"EP", 'A', 7}, {"cg", 'A', 2}} {
		if err := Allowed(c.kernel, c.class, c.np); err != nil {
			t.Errorf("Allowed(%s, %c, %d): %v", c.kernel, c.class, c.np, err)
		}
	}
	if err := Allowed("LU", 'A', 1); !errors.Is(err, ErrKernel) {
		t.Errorf("Allowed(LU): %v, want ErrKernel", err)
	}
	if err := Allowed("EP", 'A', 0); !errors.Is(err, ErrProcs) {
		t.Errorf("Allowed(EP, A, 0): %v, want ErrProcs", err)
	}
}

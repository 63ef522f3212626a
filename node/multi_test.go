package node

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gompj/gompj/node/bootstrap"
	"github.com/gompj/gompj/ranks"
)

var testSecret = []byte("node-test-secret-0123456789abcdef")

// runNodes runs a job of np ranks on nodes in-process node runtimes (goroutines), with a test coordinator.
func runNodes(t *testing.T, np, nodes int, body Body) []error {
	t.Helper()
	co, err := bootstrap.NewCoordinator(bootstrap.CoordinatorConfig{Addr: "127.0.0.1:0", Nodes: nodes, Secret: testSecret, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer co.Close()
	errs := make([]error, nodes)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = Run(Config{Ranks: np, Nodes: nodes, NodeID: i, Coordinator: co.Addr(), Secret: testSecret, Timeout: 20 * time.Second}, body)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("job hung")
	}
	return errs
}

func TestLayout(t *testing.T) {
	cases := []struct {
		np, nodes, rpn int
		want           []int // ranks per node
	}{
		{9, 3, 0, []int{3, 3, 3}},
		{10, 3, 0, []int{4, 3, 3}},
		{11, 3, 0, []int{4, 4, 3}},
		{4, 4, 0, []int{1, 1, 1, 1}},
		{10, 3, 4, []int{4, 4, 2}},
		{8, 2, 4, []int{4, 4}},
	}
	for _, c := range cases {
		l, err := NewLayout(c.np, c.nodes, c.rpn)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		next := 0
		for n := range c.nodes {
			lo, hi := l.Range(n)
			if lo != next || hi-lo != c.want[n] {
				t.Fatalf("%+v: node %d hosts [%d,%d)", c, n, lo, hi)
			}
			for r := lo; r < hi; r++ {
				if l.NodeOf(r) != n {
					t.Fatalf("%+v: NodeOf(%d) = %d, want %d", c, r, l.NodeOf(r), n)
				}
			}
			next = hi
		}
		if next != c.np {
			t.Fatalf("%+v: layout covers %d ranks", c, next)
		}
	}
	for _, bad := range [][3]int{{2, 3, 0}, {10, 2, 4}, {4, 3, 2}, {0, 1, 0}} {
		if _, err := NewLayout(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("NewLayout%v: no error", bad)
		}
	}
}

func TestFirstHost(t *testing.T) {
	for in, want := range map[string]string{
		"node01":                  "node01",
		"node[01-04,07],gpu[1-2]": "node01",
		"a,b":                     "a",
		"rack[3-4]-n[7,9]":        "rack3-n7",
		"n[5]":                    "n5",
	} {
		got, err := FirstHost(in)
		if err != nil || got != want {
			t.Errorf("FirstHost(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "n[1-2", ",a"} {
		if _, err := FirstHost(bad); err == nil {
			t.Errorf("FirstHost(%q): no error", bad)
		}
	}
}

func TestFromSlurm(t *testing.T) {
	key := t.TempDir() + "/key"
	env := map[string]string{
		"SLURM_STEP_ID": "0", "SLURM_PROCID": "2", "SLURM_STEP_NUM_TASKS": "4", "SLURM_JOB_ID": "4242",
		"SLURM_STEP_NODELIST": "cn[07-10]", "SLURM_CPUS_ON_NODE": "8", "GOMPJ_KEY_FILE": key,
	}
	var c Config
	if err := fromSlurm(&c, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if c.Nodes != 4 || c.NodeID != 2 || c.RanksPerNode != 8 || !c.ServeCoordinator ||
		c.Coordinator != fmt.Sprintf("cn07:%d", 12000+(4242*7)%18000) || len(c.Secret) != 64 {
		t.Fatalf("from Slurm: %+v", c)
	}
	// Every task of the step derives the same secret from the shared key file; another step a different one.
	var c2, c3 Config
	fromSlurm(&c2, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	env["SLURM_STEP_ID"] = "1"
	fromSlurm(&c3, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if string(c.Secret) != string(c2.Secret) || string(c.Secret) == string(c3.Secret) {
		t.Fatal("the derived secret is not per step")
	}
	if c.Source("GOMPJ_NODES") != "slurm" {
		t.Fatalf("source %q", c.Source("GOMPJ_NODES"))
	}
}

func TestMultiNodeRing(t *testing.T) {
	const np, nodes = 7, 3
	errs := runNodes(t, np, nodes, func(c *ranks.Comm) error {
		r, n := c.Rank(), c.Size()
		buf := []int{r}
		for range 3 {
			if _, err := c.Sendrecv(buf, (r+1)%n, 1, buf, (r+n-1)%n, 1); err != nil {
				return err
			}
		}
		if want := (r + n - 3) % n; buf[0] != want {
			return fmt.Errorf("rank %d got %d, want %d", r, buf[0], want)
		}
		big := make([]float64, 1<<18) // 2 MiB: rendezvous over the network
		if r == 0 {
			for i := range big {
				big[i] = float64(i)
			}
			return c.Send(big, n-1, 2)
		}
		if r == n-1 {
			if _, err := c.Recv(big, 0, 2); err != nil {
				return err
			}
			if big[12345] != 12345 {
				return errors.New("bad payload")
			}
		}
		return nil
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("node %d: %v", i, err)
		}
	}
}

func TestMultiNodeRankFailureAbortsAll(t *testing.T) {
	start := time.Now()
	errs := runNodes(t, 4, 2, func(c *ranks.Comm) error {
		if c.Rank() == 3 {
			panic("boom on rank 3")
		}
		_, err := c.Recv([]int{0}, 3, 0) // never sent: only the abort ends it
		return err
	})
	// The abort is prompt (well under a second here); a loaded machine may stretch it, so only a hang-sized delay
	// fails the test.
	took := time.Since(start)
	t.Logf("the job ended %v after it started", took.Round(time.Millisecond))
	if took > 30*time.Second {
		t.Errorf("abort took %v", took)
	}
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "node 1 (ranks 2-3)") || !strings.Contains(errs[0].Error(), "boom on rank 3") {
		t.Errorf("node 0: %v", errs[0])
	}
	var re *ranks.RankError
	if !errors.As(errs[1], &re) || re.Rank != 3 || re.Panic == nil {
		t.Errorf("node 1: %v", errs[1])
	}
}

func TestMultiNodeAbortCode(t *testing.T) {
	errs := runNodes(t, 2, 2, func(c *ranks.Comm) error {
		if c.Rank() == 0 {
			c.Abort(7)
		}
		_, err := c.Recv([]int{0}, 0, 0)
		return err
	})
	for i, err := range errs {
		if ExitCode(err) != 7 {
			t.Errorf("node %d: exit code %d: %v", i, ExitCode(err), err)
		}
	}
}

// Node 2 never starts: the others fail their bootstrap naming it once the registration timeout is over. The
// timeout (3 s) is generous, so that both other nodes have registered by then even on a loaded machine.
func TestBootstrapTimeoutNamesMissingNode(t *testing.T) {
	const timeout = 3 * time.Second
	start := time.Now()
	co, err := bootstrap.NewCoordinator(bootstrap.CoordinatorConfig{Addr: "127.0.0.1:0", Nodes: 3, Secret: testSecret, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer co.Close()
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = Run(Config{Ranks: 3, Nodes: 3, NodeID: i, Coordinator: co.Addr(), Secret: testSecret, Timeout: timeout},
				func(*ranks.Comm) error { return nil })
		}()
	}
	wg.Wait()
	t.Logf("both nodes gave up %v after the coordinator started", time.Since(start).Round(time.Millisecond))
	for i, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "[2] never registered") {
			t.Errorf("node %d: %v", i, err)
		}
	}
}

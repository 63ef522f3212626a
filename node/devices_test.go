package node

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gompj/gompj/node/bootstrap"
	"github.com/gompj/gompj/ranks"
)

func ep(host string, devs ...string) bootstrap.Endpoint {
	e := bootstrap.Endpoint{Host: host, Addrs: map[string][]byte{}}
	for _, d := range devs {
		e.Addrs[d] = []byte(d + "@" + host)
	}
	return e
}

// TestPlan: same-host peers go through the host device when both ends have it and GOMPJ_HOST_SHM is on, the
// others through the inter-host device; both ends of a pair agree; the spin decision counts the ranks of every
// node process on the host.
func TestPlan(t *testing.T) {
	l, err := NewLayout(10, 5, 0) // blocks of 2
	if err != nil {
		t.Fatal(err)
	}
	table := []bootstrap.Endpoint{
		ep("a", DevTCP, DevSHM), ep("a", DevTCP, DevSHM), ep("b", DevTCP, DevSHM), ep("a", DevTCP), ep("b", DevTCP, DevSHM),
	}
	want := [][]string{
		{"", DevSHM, DevTCP, DevTCP, DevTCP},
		{DevSHM, "", DevTCP, DevTCP, DevTCP},
		{DevTCP, DevTCP, "", DevTCP, DevSHM},
		{DevTCP, DevTCP, DevTCP, "", DevTCP}, // node 3 has no host device: its host peers use tcp both ways
		{DevTCP, DevTCP, DevSHM, DevTCP, ""},
	}
	hostRanks := []int{6, 6, 4, 6, 4}
	for self := range table {
		r, err := plan(self, table, DevTCP, true, l)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(r.names, ",") != strings.Join(want[self], ",") {
			t.Errorf("node %d: routes %q, want %q", self, r.names, want[self])
		}
		if got := r.sameHost(); got != hostRanks[self] {
			t.Errorf("node %d: %d ranks on its host, want %d", self, got, hostRanks[self])
		}
		if u := r.used(); self != 3 && (len(u) != 2 || u[0] != DevSHM) {
			t.Errorf("node %d: used %v, the host device first", self, u)
		}
		for n, a := range r.addrs(DevSHM, table) {
			if (a != nil) != (want[self][n] == DevSHM) {
				t.Errorf("node %d: shm address of node %d: %q", self, n, a)
			}
		}
		d := r.describe(nil)
		if self == 0 && (!strings.Contains(d, "shm      nodes 1: shm") || !strings.Contains(d, "tcp      nodes 2-4: tcp")) {
			t.Errorf("node 0's route table:\n%s", d)
		}
	}
	r, err := plan(0, table, DevTCP, false, l)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(r.names, ",") != ",tcp,tcp,tcp,tcp" {
		t.Errorf("GOMPJ_HOST_SHM=0: routes %q", r.names)
	}
	if _, err := plan(0, table, DevRDMA, false, l); err == nil || !strings.Contains(err.Error(), "node 1 did not open the rdma device") {
		t.Errorf("a peer without the inter-host device: %v", err)
	}
	if spans([]int{0, 1, 2, 5, 7, 8}) != "0-2,5,7-8" {
		t.Error(spans([]int{0, 1, 2, 5, 7, 8}))
	}
}

func TestCheckDevice(t *testing.T) {
	if err := CheckDevice("tcp"); err != nil {
		t.Error(err)
	}
	if err := CheckDevice("ib"); err == nil {
		t.Error("unknown device accepted")
	}
	if err := CheckDevice("rdma"); err != nil && !strings.Contains(err.Error(), "built without ofi: rebuild with -tags ofi") {
		t.Errorf("rdma: %v", err)
	}
}

// TestRoutesInJob: node processes of one host (here, node runtimes of one process) share memory by default and
// talk through tcp with NoHostSHM; the World says which.
func TestRoutesInJob(t *testing.T) {
	for _, noSHM := range []bool{false, true} {
		co, err := bootstrap.NewCoordinator(bootstrap.CoordinatorConfig{Addr: "127.0.0.1:0", Nodes: 2, Secret: testSecret, Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		routes := make([]string, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = Run(Config{Ranks: 4, Nodes: 2, NodeID: i, Coordinator: co.Addr(), Secret: testSecret,
					Timeout: 20 * time.Second, NoHostSHM: noSHM}, func(c *ranks.Comm) error {
					if c.Rank()%2 == 0 {
						routes[c.Rank()/2] = c.World().Routes()
					}
					// traffic both ways across the route
					buf := make([]int, 1000)
					_, err := c.Sendrecv(buf, (c.Rank()+2)%4, 0, buf, (c.Rank()+2)%4, 0)
					return err
				})
			}()
		}
		wg.Wait()
		co.Close()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("noSHM %v, node %d: %v", noSHM, i, err)
			}
			want := "shm      nodes " + strconv.Itoa(1-i) + ": shm: rings in shared memory"
			if noSHM {
				want = "tcp      nodes " + strconv.Itoa(1-i) + ": tcp"
			}
			if !strings.Contains(routes[i], want) {
				t.Errorf("noSHM %v, node %d: routes\n%s\nwant %q", noSHM, i, routes[i], want)
			}
		}
	}
}

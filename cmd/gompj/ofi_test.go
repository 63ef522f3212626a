//go:build ofi

package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The rdma device over libfabric (builds with -tags ofi): node processes of one box and of network namespaces
// talk through libfabric's tcp provider. TestMain's binaries are built without the tag; these tests build their
// own with it.

var ofiBins struct {
	once          sync.Once
	gompj, faulty string
	err           error
}

// ofiEnv routes every peer through the rdma device over tcp;ofi_rxm.
var ofiEnv = []string{"GOMPJ_HOST_SHM=0", "GOMPJ_DEV=rdma", "FI_PROVIDER=tcp"}

func withOFI(t *testing.T) {
	t.Helper()
	ofiBins.once.Do(func() {
		build := func(name, pkg string) string {
			out := filepath.Join(bin.dir, name)
			cmd := exec.Command("go", "build", "-tags", "ofi", "-o", out, pkg)
			cmd.Dir = bin.root
			if b, err := cmd.CombinedOutput(); err != nil && ofiBins.err == nil {
				ofiBins.err = &buildError{pkg, string(b)}
			}
			return out
		}
		ofiBins.gompj = build("gompj-ofi", "./cmd/gompj")
		ofiBins.faulty = build("faulty-ofi", "./cmd/gompj/testdata/faulty")
	})
	if ofiBins.err != nil {
		t.Fatal(ofiBins.err)
	}
	// The tests of this package run one at a time: the binaries the helpers use are swapped for the test.
	g, f := bin.gompj, bin.faulty
	bin.gompj, bin.faulty = ofiBins.gompj, ofiBins.faulty
	t.Cleanup(func() { bin.gompj, bin.faulty = g, f })
}

type buildError struct{ pkg, out string }

func (e *buildError) Error() string { return "building " + e.pkg + " with -tags ofi: " + e.out }

func TestOFIInfo(t *testing.T) {
	withOFI(t)
	r := runGompj(t, []string{"FI_PROVIDER=tcp"}, "info")
	if r.code != 0 || !strings.Contains(r.stdout, "rdma") || !strings.Contains(r.stdout, "libfabric 1.") ||
		!strings.Contains(r.stdout, "-dev rdma takes tcp;ofi_rxm") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestOFIRun: a job of three node processes over the rdma device on one box, with its routes.
func TestOFIRun(t *testing.T) {
	withOFI(t)
	r := runGompj(t, ofiEnv, "bench", "latency", "-np", "3", "-nodes", "3", "-sizes", "0,64,64K,1M", "-iters", "50")
	if r.code != 0 || !strings.Contains(r.stdout, "1048576 ") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestKillNodeAbortsJobOFI: a node process killed in a job over the rdma device ends the job within 5 s, naming
// it (as TestKillNodeAbortsJob for the other devices).
func TestKillNodeAbortsJobOFI(t *testing.T) {
	withOFI(t)
	killNode(t, ofiEnv)
}

// TestNetnsOFI: node processes in three network namespaces, started as a batch system would, talk through the
// rdma device over libfabric's tcp provider: latency and bandwidth benchmarks cross the veth pairs.
func TestNetnsOFI(t *testing.T) {
	withOFI(t)
	ns := newNetns(t, 3)
	before := ns.rxBytes(t, 1)
	secret := secretHex()
	for k, bench := range [][]string{{"bw", "-sizes", "1M", "-iters", "8", "-warmup", "1"},
		{"latency", "-sizes", "0,4K,1M", "-iters", "20"}} {
		var cmds []*exec.Cmd
		outs := make([]*strings.Builder, 3)
		port := strconv.Itoa(7421 + k)
		for i := range 3 {
			cmd := exec.Command("ip", append([]string{"netns", "exec", ns.hosts[i], bin.gompj, "bench-node"}, bench...)...)
			cmd.Env = append(os.Environ(), "GOMPJ_NP=3", "GOMPJ_NODES=3", "GOMPJ_NODE_ID="+strconv.Itoa(i),
				"GOMPJ_COORDINATOR="+net.JoinHostPort(ns.ips[0], port), "GOMPJ_SECRET="+secret, "GOMPJ_TIMEOUT=30s",
				"GOMPJ_DEV=rdma", "FI_PROVIDER=tcp")
			if i == 0 {
				cmd.Env = append(cmd.Env, "GOMPJ_COORDINATOR_SERVE=1")
			}
			outs[i] = &strings.Builder{}
			cmd.Stdout, cmd.Stderr = outs[i], outs[i]
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds = append(cmds, cmd)
		}
		for i, cmd := range cmds {
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("%s: node %d: %v\n%s", bench[0], i, err, outs[i].String())
				}
			case <-time.After(90 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("%s: node %d hung\n%s", bench[0], i, outs[i].String())
			}
		}
		if !strings.Contains(outs[0].String(), "1048576") {
			t.Errorf("%s: no 1 MiB line from rank 0:\n%s", bench[0], outs[0].String())
		}
	}
	if got := ns.rxBytes(t, 1) - before; got < 9<<20 {
		t.Errorf("host 1 received %d bytes over its interface, want at least 9 MiB", got)
	}
}

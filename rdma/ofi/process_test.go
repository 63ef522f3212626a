//go:build ofi

package ofi

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gompj/gompj/rdma"
)

// Tests across processes: node 1 runs in a child process (this test binary, TestChild), so that it can die as a
// process dies, and close as a process closes.

const childMessages = 50

func childOpts() Options {
	return Options{Heartbeat: 50 * time.Millisecond, LossTimeout: time.Second, CloseTimeout: 5 * time.Second}
}

// removeRegions removes what libfabric's shm provider left in /dev/shm for a child that was killed: its regions,
// named after the child's pid ("<pid>:<domain>:<endpoint>"). Left there, they failed a later child that the kernel
// gave the same pid: its endpoint's fi_enable found the name taken (EBUSY, TestPeerClosed/shm/tagged, after some
// hundred runs of the suite on one machine).
func removeRegions(pid int) {
	names, _ := filepath.Glob(fmt.Sprintf("/dev/shm/%d:*", pid))
	for _, n := range names {
		os.Remove(n)
	}
}

// pair opens node 0 here and node 1 in a child, exchanging addresses over the child's stdin and stdout.
func pair(t *testing.T, fc fabricCase, mode string) (*tnode, *exec.Cmd, *bufio.Reader) {
	t.Helper()
	o := childOpts()
	o.Provider, o.API = fc.prov, fc.api
	ep, err := New(o).Open(rdma.EndpointConfig{Node: 0, Nodes: 2, Secret: []byte("process test")})
	if err != nil {
		t.Fatal(err)
	}
	x := &tnode{t: t, id: 0, ep: ep.(*endpoint), size: tbuf, nbuf: 64, cs: make([]rdma.Completion, 16)}
	t.Cleanup(func() { x.ep.Close() })
	cmd := exec.Command(os.Args[0], "-test.run=^TestChild$", "-test.v")
	cmd.Env = append(os.Environ(), "GOFI_CHILD="+strings.Join([]string{mode, fc.prov, fc.api}, ","))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		removeRegions(cmd.Process.Pid)
	})
	out := bufio.NewReader(outp)
	addr := readLine(t, out, "addr ")
	b, err := hex.DecodeString(addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.ep.Connect(1, b); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(in, "addr %x\n", x.ep.Address())
	x.postAll()
	if err := x.ep.Ready(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	return x, cmd, out
}

// readLine returns the rest of the child's next line with the prefix, skipping test chatter. If the child ends
// first, the failure quotes what it said instead: a child that failed before its address (once in CI, the shm
// provider's tagged case, not seen again in 10 runs) says why in its test output, which goes to this pipe.
func readLine(t *testing.T, r *bufio.Reader, prefix string) string {
	t.Helper()
	var said strings.Builder
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("the child said no %q: %v; it said:\n%s%s", prefix, err, said.String(), l)
		}
		said.WriteString(l)
		if s, ok := strings.CutPrefix(l, prefix); ok {
			return strings.TrimSpace(s)
		}
	}
}

func procCases(t *testing.T, f func(t *testing.T, fc fabricCase)) {
	eachFabric(t, func(t *testing.T, fc fabricCase) {
		if fc.api != "tagged" && testing.Short() {
			t.Skip("short: FI_MSG is covered in one process")
		}
		f(t, fc)
	})
}

// TestPeerKilled: a peer killed with SIGKILL is reported lost within the loss timeout (and a little), naming it;
// sends to it fail after, and nothing hangs.
func TestPeerKilled(t *testing.T) {
	procCases(t, func(t *testing.T, fc fabricCase) {
		x, cmd, out := pair(t, fc, "idle")
		readLine(t, out, "sent")
		until(t, []*tnode{x}, "the child's messages", func() bool { return len(x.recvs) == childMessages }, nil)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		var lost *rdma.Completion
		until(t, []*tnode{x}, "the loss", func() bool { return lost != nil }, func(_ *tnode, cs []rdma.Completion) {
			for _, c := range cs {
				if c.Op != rdma.OpPeerLost || c.Node != 1 {
					t.Fatalf("%+v", c)
				}
				lost = &c
			}
		})
		took := time.Since(killed)
		if !strings.Contains(lost.Err.Error(), "node 1") {
			t.Fatalf("loss: %v", lost.Err)
		}
		if lim := childOpts().LossTimeout + 3*time.Second; took > lim {
			t.Fatalf("the loss took %v (more than %v)", took, lim)
		}
		t.Logf("lost after %v: %v", took.Round(time.Millisecond), lost.Err)
		if err := x.ep.Inject(1, message(0, 0, 8), nil); err == nil || !strings.Contains(err.Error(), "node 1") {
			t.Fatalf("inject to a lost peer: %v", err)
		}
	})
}

// TestPeerClosed: a peer that closes is reported closed, not lost, after every message it sent before.
func TestPeerClosed(t *testing.T) {
	procCases(t, func(t *testing.T, fc fabricCase) {
		x, cmd, _ := pair(t, fc, "close")
		var closed bool
		until(t, []*tnode{x}, "the close", func() bool { return closed }, func(_ *tnode, cs []rdma.Completion) {
			for _, c := range cs {
				if c.Op != rdma.OpPeerClosed || c.Node != 1 {
					t.Fatalf("%+v", c)
				}
				if len(x.recvs) != childMessages {
					t.Fatalf("closed after %d of %d messages", len(x.recvs), childMessages)
				}
				closed = true
			}
		})
		for i, r := range x.recvs {
			if want := message(1, i, childSize(i)); string(r.data) != string(want) {
				t.Fatalf("message %d garbled", i)
			}
		}
		// Its Close waits for the acknowledgement, which this node's polls gave.
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		until(t, []*tnode{x}, "the child's exit", func() bool {
			select {
			case err = <-done:
				return true
			default:
				return false
			}
		}, nil)
		if err != nil {
			t.Fatalf("child: %v", err)
		}
	})
}

func childSize(i int) int {
	if i%2 == 0 {
		return 8
	}
	return 1000 + i
}

// TestChild is node 1 of the tests above when GOFI_CHILD says so.
func TestChild(t *testing.T) {
	spec := os.Getenv("GOFI_CHILD")
	if spec == "" {
		t.Skip("runs as a child of TestPeerKilled and TestPeerClosed")
	}
	f := strings.Split(spec, ",")
	mode, o := f[0], childOpts()
	o.Provider, o.API = f[1], f[2]
	ep, err := New(o).Open(rdma.EndpointConfig{Node: 1, Nodes: 2, Secret: []byte("process test")})
	if err != nil {
		t.Fatal(err)
	}
	x := &tnode{t: t, id: 1, ep: ep.(*endpoint), size: tbuf, nbuf: 64, cs: make([]rdma.Completion, 16)}
	fmt.Printf("addr %x\n", x.ep.Address())
	in := bufio.NewReader(os.Stdin)
	b, err := hex.DecodeString(readLine(t, in, "addr "))
	if err != nil {
		t.Fatal(err)
	}
	if err := x.ep.Connect(0, b); err != nil {
		t.Fatal(err)
	}
	x.postAll()
	if err := x.ep.Ready(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	sent, completed := 0, 0
	sends := 0
	until(t, []*tnode{x}, "the sends", func() bool { return sent == childMessages && completed == sends }, func(_ *tnode, cs []rdma.Completion) {
		for _, c := range cs {
			if c.Op != rdma.OpSend || c.Err != nil {
				t.Fatalf("%+v", c)
			}
			completed++
		}
		if sent == childMessages {
			return
		}
		m := message(1, sent, childSize(sent))
		var err error
		if len(m) <= x.ep.Caps().InjectSize {
			err = x.ep.Inject(0, m, nil)
		} else if err = x.ep.Send(0, m, nil, uint64(sent)); err == nil {
			sends++
		}
		switch {
		case err == nil:
			sent++
		case err != rdma.ErrAgain:
			t.Fatal(err)
		}
	})
	fmt.Println("sent")
	switch mode {
	case "idle":
		for {
			x.poll()
			time.Sleep(time.Millisecond)
		}
	case "close":
		if err := x.ep.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

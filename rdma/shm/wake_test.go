//go:build linux

package shm

import (
	"encoding/binary"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gompj/gompj/rdma"
)

// testDoorbell is a doorbell over a control page of its own; rings is how many rings it holds (a non-blocking
// read of its eventfd, which takes them).
func testDoorbell(t *testing.T) *doorbell {
	d, err := newDoorbell(make([]byte, pageSize))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.close)
	return d
}

func rings(t *testing.T, d *doorbell) uint64 {
	var b [8]byte
	n, err := unix.Read(d.fd, b[:])
	if err == unix.EAGAIN {
		return 0
	}
	if err != nil || n != 8 {
		t.Fatalf("reading the eventfd: %d bytes, %v", n, err)
	}
	return binary.NativeEndian.Uint64(b[:])
}

// TestWakeRingsOnce: of the producers that find the sleeping flag up, only the first rings the doorbell (a system
// call); it lowers the flag, and the others see it down.
func TestWakeRingsOnce(t *testing.T) {
	d := testDoorbell(t)
	b := d.bell()
	b.wake()
	if n := rings(t, d); n != 0 {
		t.Fatalf("%d rings after a wake with nobody asleep", n)
	}
	atomic.StoreUint32(u32(d.ctl, ctlSleeping), 1)
	for range 5 {
		b.wake()
	}
	if n, s := rings(t, d), atomic.LoadUint32(u32(d.ctl, ctlSleeping)); n != 1 || s != 0 {
		t.Fatalf("after 5 wakes of a sleeper: %d rings (want 1), sleeping %d (want 0)", n, s)
	}
}

// TestWakeNeverLost runs the sleeper's protocol (Wait: raise the flag, look for work, sleep) against producers
// that publish and wake, many times. The producers ring through another descriptor of the eventfd, as a peer's
// does (one passed over the socket shares the open file, non-blocking). A lost wake-up leaves the sleeper asleep
// with work published: it would sleep out its whole (long) timeout, which the test reports.
func TestWakeNeverLost(t *testing.T) {
	d := testDoorbell(t)
	fd, err := unix.Dup(d.fd)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	b := bell{ctl: d.ctl, fd: fd}
	const producers, each = 4, 20000
	var published atomic.Int64
	var wg sync.WaitGroup
	for range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				published.Add(1)
				b.wake()
			}
		}()
	}
	var taken int64
	for taken < producers*each {
		atomic.StoreUint32(u32(d.ctl, ctlSleeping), 1)
		if published.Load() == taken {
			start := time.Now()
			d.sleep(time.Minute)
			if d := time.Since(start); d >= time.Minute {
				t.Fatalf("slept out the timeout with %d of %d taken: a lost wake-up", taken, producers*each)
			}
		}
		atomic.StoreUint32(u32(d.ctl, ctlSleeping), 0)
		taken = published.Load()
	}
	wg.Wait()
}

// TestWaitTimesOut: a Wait that nobody ends returns after its timeout, not before (a fresh doorbell holds no ring).
func TestWaitTimesOut(t *testing.T) {
	ep, err := Provider{}.Open(rdma.EndpointConfig{Node: 0, Nodes: 2, Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	start := time.Now()
	ep.Wait(20 * time.Millisecond)
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("Wait(20ms) returned after %v with nothing to do", d)
	}
}

// TestForgedDoorbellRefused: a peer's doorbell must be a non-blocking eventfd; a file, a pipe or a blocking
// eventfd (a ring could block the sender) are refused.
func TestForgedDoorbellRefused(t *testing.T) {
	d := testDoorbell(t)
	good, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(good)
	if err := checkEventfd(good, d.fd); err != nil {
		t.Fatalf("a non-blocking eventfd refused: %v", err)
	}
	blocking, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(blocking)
	mem, err := unix.MemfdCreate("not-a-doorbell", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(mem)
	var pipe [2]int
	if err := unix.Pipe2(pipe[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pipe[0])
	defer unix.Close(pipe[1])
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ep)
	for name, fd := range map[string]int{"a blocking eventfd": blocking, "a memfd": mem, "a pipe": pipe[1], "an epoll set": ep} {
		if err := checkEventfd(fd, d.fd); err == nil {
			t.Errorf("%s accepted as a doorbell", name)
		}
	}
}

// TestWaitParksInNetpoller: the progress goroutine sleeps in Go's netpoller ("IO wait"), not in a blocking system
// call ("syscall"). A goroutine in a system call keeps its P until sysmon takes it back (20 µs to 10 ms later),
// and every such retake keeps sysmon waking every 20 µs: in NPB CG across two node processes, nine in ten of
// sysmon's retakes were of a P held by this sleep. Wake ends the Wait.
func TestWaitParksInNetpoller(t *testing.T) {
	ep, err := Provider{}.Open(rdma.EndpointConfig{Node: 0, Nodes: 2, Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		ep.Wait(time.Minute)
	}()
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(30 * time.Second)
	for {
		state, ok := waitState(buf[:runtime.Stack(buf, true)])
		if ok && strings.HasPrefix(state, "IO wait") {
			break
		}
		if ok && strings.HasPrefix(state, "syscall") {
			t.Fatalf("Wait sleeps in a system call (goroutine state %q), holding its P", state)
		}
		if time.Now().After(deadline) {
			t.Fatalf("Wait did not go to sleep within 30 s (last state %q)", state)
		}
		runtime.Gosched()
	}
	ep.Wake()
	<-done
}

// waitState finds the goroutine inside the endpoint's Wait in a dump of all stacks and returns its state.
func waitState(dump []byte) (string, bool) {
	for _, g := range strings.Split(string(dump), "\n\n") {
		if !strings.Contains(g, "shm.(*endpoint).Wait(") {
			continue
		}
		_, rest, _ := strings.Cut(g, "[")
		state, _, _ := strings.Cut(rest, "]")
		return state, true
	}
	return "", false
}

// TestReadyMeansReachable: once Ready reports every peer connected, a send finds each of them at once. The
// connection's goroutine used to mark a peer ready before it entered the table that sends look peers up in, so a send
// right after Ready failed now and then with "not connected" (once in about 2000 runs of TestEagerAllocs under the
// race detector with a load). Each round connects two fresh endpoints and looks the moment Ready returns.
func TestReadyMeansReachable(t *testing.T) {
	for round := range 50 {
		var eps [2]*endpoint
		for i := range eps {
			ep, err := Provider{}.Open(rdma.EndpointConfig{Node: i, Nodes: 2, Secret: testSecret})
			if err != nil {
				t.Fatal(err)
			}
			eps[i] = ep.(*endpoint)
		}
		for i, ep := range eps {
			if err := ep.Connect(1-i, eps[1-i].Address()); err != nil {
				t.Fatal(err)
			}
		}
		for i, ep := range eps {
			if err := ep.Ready(10 * time.Second); err != nil {
				t.Fatal(err)
			}
			if ep.peer(1-i) == nil {
				t.Fatalf("round %d: node %d is ready but cannot reach node %d", round, i, 1-i)
			}
		}
		for _, ep := range eps {
			ep.Close()
		}
	}
}

//go:build linux

package netdev

import (
	"bytes"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gompj/gompj/device"
)

var _ device.Poller = (*Device)(nil)

// TestDrivenProgress: while a goroutine drives device 1 (Enter, Poll, Leave), the progress loop stands down and
// every frame is delivered by the driver's Poll calls; once the driver parks (Leave(true)), the loop delivers again
// on its own; a rendezvous works while driven; Close completes while a driver is still inside Enter/Leave.
func TestDrivenProgress(t *testing.T) {
	c := startCluster(t, 2, 1, nil)
	d0, d1 := c.devs[0], c.devs[1]
	var inPoll atomic.Bool
	var viaPoll, viaLoop atomic.Int64
	c.sinks[1].mu.Lock()
	c.sinks[1].onEager = func(in *device.Inbound) bool {
		if inPoll.Load() {
			viaPoll.Add(1)
		} else {
			viaLoop.Add(1)
		}
		return false
	}
	c.sinks[1].mu.Unlock()

	const n = 200
	d1.Enter()
	// The loop may be inside one last busy-poll round, or just woken out of epoll_wait, when Enter runs; wait
	// until it has stood down.
	waitUntil(t, 5*time.Second, "the loop to stand down", d1.standing.Load)
	base := viaLoop.Load()
	h := &device.Header{Source: 0, Dest: 1, Tag: 7}
	for i := range n {
		if err := d0.SendEager(h, payloadFor(0, 1, i, 16), nil); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		inPoll.Store(true)
		d1.Poll()
		inPoll.Store(false)
		if e, _, _ := c.sinks[1].counts(); e >= n {
			break
		}
		if time.Now().After(deadline) {
			e, _, _ := c.sinks[1].counts()
			t.Fatalf("driven device delivered %d of %d frames", e, n)
		}
	}
	// A frame may have been read by the loop's last round before it stood down; everything else came by Poll.
	if got := viaLoop.Load() - base; got > 1 {
		t.Fatalf("%d frames were delivered by the loop while a driver was active (%d by Poll)", got, viaPoll.Load())
	}
	if viaPoll.Load() < n-1 {
		t.Fatalf("only %d of %d frames delivered by Poll", viaPoll.Load(), n)
	}

	// Rendezvous under a driver: the RTS arrives by Poll, the CTS and DATA flow, the completions fire.
	c.sinks[1].mu.Lock()
	c.sinks[1].onRTS = func(rts *device.Header) bool {
		dst := make([]byte, rts.Length)
		if err := d1.ClearToSend(rts, dst, nil); err != nil {
			t.Error(err)
		}
		return false
	}
	c.sinks[1].mu.Unlock()
	big := payloadFor(0, 1, 1, 3<<20)
	sent := newCompleter()
	if err := d0.SendRendezvous(&device.Header{Kind: device.KindRTS, Source: 0, Dest: 1, Tag: 9, Length: uint64(len(big))}, big, sent); err != nil {
		t.Fatal(err)
	}
	for {
		d1.Poll()
		select {
		case err := <-sent:
			if err != nil {
				t.Fatal(err)
			}
		default:
			if time.Now().After(deadline.Add(10 * time.Second)) {
				t.Fatal("rendezvous did not complete under a driver")
			}
			continue
		}
		break
	}

	// The driver parks: the loop must take over without any Poll.
	d1.Leave(true)
	before, _, _ := c.sinks[1].counts()
	for i := range 10 {
		if err := d0.SendEager(h, payloadFor(0, 1, i, 8), nil); err != nil {
			t.Fatal(err)
		}
	}
	c.sinks[1].wait(t, 10*time.Second, "the loop to deliver after the driver parked", func() bool {
		return len(c.sinks[1].eager) >= before+10
	})

	// Close while a driver is inside Enter/Leave (it stops polling but never left). The loop takes Close's steps
	// over: Close ends well within the cluster's close timeout (5 s), which it took twice over when the loop stood
	// down for the idle driver after every wait.
	d1.Enter()
	done := make(chan error, 1)
	go func() { done <- d1.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("Close hung while a driver was registered")
	}
	if d1.Poll() {
		t.Fatal("Poll did work on a closed device")
	}
	d1.Leave(false)
}

// TestPollWhileLoopSleeps: a rank that starts to drive can poll at once, while the progress loop still sleeps in
// epoll_wait (it sleeps without the poll lock), rather than wait for the loop's thread to be woken and scheduled; and
// a frame that arrives then is delivered exactly once, whichever of the two takes it from epoll.
func TestPollWhileLoopSleeps(t *testing.T) {
	c := startCluster(t, 2, 1, nil)
	d0, d1 := c.devs[0], c.devs[1]
	waitUntil(t, 5*time.Second, "the loop to sleep in epoll_wait", d1.loopBlocked.Load)
	// Without Enter the loop is not woken: it sleeps on, and the lock must be free.
	if !d1.pollMu.TryLock() {
		t.Fatal("the poll lock is held while the loop sleeps in epoll_wait")
	}
	d1.pollMu.Unlock()
	// Frames arrive while nobody drives and while a goroutine polls without Enter: each is delivered once.
	const n = 100
	h := &device.Header{Source: 0, Dest: 1, Tag: 3}
	for i := range n {
		if err := d0.SendEager(h, payloadFor(0, 1, i, 32), nil); err != nil {
			t.Fatal(err)
		}
		d1.Poll()
	}
	c.sinks[1].wait(t, 10*time.Second, "every frame", func() bool { return len(c.sinks[1].eager) >= n })
	c.sinks[1].mu.Lock()
	defer c.sinks[1].mu.Unlock()
	if len(c.sinks[1].eager) != n {
		t.Fatalf("%d frames delivered, want %d", len(c.sinks[1].eager), n)
	}
	for i, in := range c.sinks[1].eager {
		if !bytes.Equal(in.Payload, payloadFor(0, 1, i, 32)) {
			t.Fatalf("frame %d: payload %x, want frame %d's (lost, repeated or reordered)", i, in.Payload, i)
		}
	}
}

// TestSetBusyPoll: a loop configured to poll for an hour after an event sleeps in epoll_wait again once
// SetBusyPoll turns busy polling off, as node does where the host's ranks outnumber its cores. Without the setter
// the loop would poll on for the hour, holding a processor, and the wait below would time out.
func TestSetBusyPoll(t *testing.T) {
	c := startCluster(t, 2, 1, func(i int, cfg *Config) { cfg.BusyPoll = time.Hour })
	d0, d1 := c.devs[0], c.devs[1]
	if err := d0.SendEager(&device.Header{Source: 0, Dest: 1, Tag: 1}, []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	c.sinks[1].wait(t, 10*time.Second, "the frame", func() bool { return len(c.sinks[1].eager) == 1 })
	if d1.loopBlocked.Load() {
		t.Fatal("the loop sleeps right after an event, with an hour of busy polling configured")
	}
	d1.SetBusyPoll(-1)
	waitUntil(t, 10*time.Second, "the loop to sleep in epoll_wait after SetBusyPoll(-1)", d1.loopBlocked.Load)
}

// TestEnterWakesLoopWhileDriverPolls: a rank that starts to drive wakes the sleeping loop, which then stands down,
// even though the rank polls the device's epoll set at once. When that set held the loop's eventfd, the rank's polls
// took the wake-up, and the loop slept on through the whole drive, woken by every frame that arrived.
func TestEnterWakesLoopWhileDriverPolls(t *testing.T) {
	c := startCluster(t, 2, 1, nil)
	d1 := c.devs[1]
	for round := range 20 {
		waitUntil(t, 5*time.Second, "the loop to sleep in epoll_wait", d1.loopBlocked.Load)
		d1.Enter()
		deadline := time.Now().Add(5 * time.Second)
		for !d1.standing.Load() {
			d1.Poll()
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the loop did not stand down while a rank drove the device", round)
			}
		}
		d1.Leave(true)
	}
}

// TestStandDownFor: a loop that stood down looks again soon while rendezvous transfers are under way (a rank that
// stops waiting without parking leaves them to it), and seldom otherwise (each look takes a core from a spinning
// rank).
func TestStandDownFor(t *testing.T) {
	for _, tc := range []struct {
		sends, recvs int64
		want         time.Duration
	}{
		{0, 0, device.StandDownIdle},
		{1, 0, device.StandDownCheck},
		{0, 2, device.StandDownCheck},
		{3, 1, device.StandDownCheck},
	} {
		d := &Device{}
		d.inflightRdv.Store(tc.sends)
		d.inflightRecv.Store(tc.recvs)
		if got := d.standDownFor(); got != tc.want {
			t.Errorf("%d sends and %d receives under way: %v, want %v", tc.sends, tc.recvs, got, tc.want)
		}
	}
}

// TestPollWaitsForLongLoopRound: a Poll that finds the device held by the loop leaves it to the loop while the
// loop's round is young, and waits for the round, parked on the lock, once it has taken longer than loopGrace (the
// loop's thread may be waiting for the core the polling rank would spin on); then it polls.
func TestPollWaitsForLongLoopRound(t *testing.T) {
	c := startCluster(t, 2, 1, nil)
	d1 := c.devs[1]
	waitUntil(t, 5*time.Second, "the loop to sleep in epoll_wait", d1.loopBlocked.Load)
	d1.pollMu.Lock() // this test stands in for the loop in a round of handling
	before := d1.polls
	d1.loopHandles.Store(d1.clock() + int64(time.Hour)) // a round that began just now, whatever the clock does
	young := d1.Poll() || d1.polls != before
	d1.loopHandles.Store(max(d1.clock()-int64(time.Second), 1))
	started, done := make(chan struct{}), make(chan struct{})
	go func() {
		close(started)
		d1.Poll()
		close(done)
	}()
	<-started
	early := false
	for i := 0; i < 1000 && !early; i++ {
		runtime.Gosched()
		select {
		case <-done:
			early = true
		default:
		}
	}
	d1.loopHandles.Store(0)
	d1.pollMu.Unlock() // before any Fatal: closing the device takes the lock
	if young {
		t.Fatal("a Poll during a young round of the loop did not leave it to the loop")
	}
	if early {
		t.Fatal("a Poll during a long round of the loop returned before the round ended")
	}
	<-done
	d1.pollMu.Lock()
	after := d1.polls
	d1.pollMu.Unlock()
	if after != before+1 {
		t.Fatalf("%d polls after the round, want %d: the waiting Poll did not poll", after, before+1)
	}
}

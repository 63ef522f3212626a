//go:build linux

package netdev

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gompj/gompj/device"
)

const waitLong = 10 * time.Second

func eagerHeader(src, dst int32, tag int32) *device.Header {
	return &device.Header{Source: src, Dest: dst, Tag: tag, Context: 7, Type: 3}
}

func TestEagerOrderPerPair(t *testing.T) {
	c := startCluster(t, 3, 2, nil)
	const per = 300
	var wg sync.WaitGroup
	// every rank of nodes 0 and 1 sends to every rank of node 2, concurrently
	for node := 0; node < 2; node++ {
		for l := 0; l < 2; l++ {
			src := c.rank(node, l)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range per {
					for dl := 0; dl < 2; dl++ {
						dst := c.rank(2, dl)
						p := payloadFor(src, dst, i, 8+i%200)
						if err := c.devs[node].SendEager(eagerHeader(src, dst, int32(i)), p, nil); err != nil {
							t.Error(err)
							return
						}
					}
				}
			}()
		}
	}
	wg.Wait()
	s := c.sinks[2]
	s.wait(t, waitLong, "all eager messages", func() bool { return len(s.eager) == 4*2*per })
	next := map[[2]int32]int{}
	for _, in := range s.eager {
		k := [2]int32{in.Header.Source, in.Header.Dest}
		i := next[k]
		next[k]++
		if in.Header.Tag != int32(i) {
			t.Fatalf("pair %v: got tag %d, want %d (out of order)", k, in.Header.Tag, i)
		}
		if want := payloadFor(k[0], k[1], i, 8+i%200); !bytes.Equal(in.Payload, want) {
			t.Fatalf("pair %v message %d: payload differs", k, i)
		}
		if in.Header.Context != 7 || in.Header.Type != 3 || in.Header.Kind != device.KindEager {
			t.Fatalf("header not carried: %+v", in.Header)
		}
		in.Done()
	}
	if _, _, lost := s.counts(); lost != 0 {
		t.Fatalf("unexpected PeerLost: %v", s.lost)
	}
}

func TestSyncAck(t *testing.T) {
	c := startCluster(t, 2, 1, nil)
	done := newCompleter()
	h := eagerHeader(0, 1, 5)
	h.Flags = device.FlagSync
	if err := c.devs[0].SendEager(h, []byte("hello"), done); err != nil {
		t.Fatal(err)
	}
	s := c.sinks[1]
	s.wait(t, waitLong, "the sync message", func() bool { return len(s.eager) == 1 })
	select {
	case err := <-done:
		t.Fatalf("sync send completed before the match (err %v)", err)
	default:
	}
	in := s.eager[0]
	if string(in.Payload) != "hello" || in.Header.Flags&device.FlagSync == 0 {
		t.Fatalf("got %q flags %x", in.Payload, in.Header.Flags)
	}
	if err := c.devs[1].Ack(&in.Header); err != nil {
		t.Fatal(err)
	}
	in.Done()
	if err := done.wait(t, waitLong, "the ack"); err != nil {
		t.Fatal(err)
	}
}

// rdvResult is one rendezvous message received by clearOnRTS's sink.
type rdvResult struct {
	h   device.Header
	buf []byte
	err error
}

// clearOnRTS makes node's sink answer every RTS at once with a fresh buffer; results land in the returned channel.
func clearOnRTS(t testing.TB, c *cluster, node int) chan rdvResult {
	out := make(chan rdvResult, 1024)
	d := c.devs[node]
	s := c.sinks[node]
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onRTS = func(h *device.Header) bool {
		buf := make([]byte, h.Length)
		done := completerFunc(func(err error) { out <- rdvResult{*h, buf, err} })
		if err := d.ClearToSend(h, buf, done); err != nil {
			t.Errorf("ClearToSend: %v", err)
		}
		return true
	}
	return out
}

type completerFunc func(error)

func (f completerFunc) Complete(err error) { f(err) }

func TestRendezvousSizes(t *testing.T) {
	c := startCluster(t, 2, 2, nil)
	got := clearOnRTS(t, c, 1)
	sizes := []int{0, 1, 100, 4095, 16 << 10, 64<<10 + 1, 1 << 20, 1<<20 + 3, 3<<20 + 17, 8 << 20}
	sent := make([]completer, len(sizes))
	for i, n := range sizes {
		src, dst := c.rank(0, i%2), c.rank(1, (i/2)%2)
		sent[i] = newCompleter()
		if err := c.devs[0].SendRendezvous(eagerHeader(src, dst, int32(i)), payloadFor(src, dst, i, n), sent[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i := range sizes {
		if err := sent[i].wait(t, waitLong, "send completion "+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[int32]bool{}
	for range sizes {
		var r rdvResult
		select {
		case r = <-got:
		case <-time.After(waitLong):
			t.Fatal("timed out waiting for receive completions")
		}
		if r.err != nil {
			t.Fatal(r.err)
		}
		i := int(r.h.Tag)
		seen[r.h.Tag] = true
		if want := payloadFor(r.h.Source, r.h.Dest, i, sizes[i]); !bytes.Equal(r.buf, want) {
			t.Fatalf("message %d (%d bytes) differs", i, sizes[i])
		}
	}
	if len(seen) != len(sizes) {
		t.Fatalf("received %d distinct messages of %d", len(seen), len(sizes))
	}
}

func TestConcurrentMixed(t *testing.T) {
	c := startCluster(t, 3, 3, func(i int, cfg *Config) { cfg.ChunkSize = 64 << 10 })
	rcv := []chan rdvResult{nil, clearOnRTS(t, c, 1), clearOnRTS(t, c, 2)}
	const per = 40
	var wg sync.WaitGroup
	var sendDone sync.WaitGroup
	for l := 0; l < 3; l++ {
		src := c.rank(0, l)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				for node := 1; node < 3; node++ {
					dst := c.rank(node, i%3)
					if i%4 == 0 {
						done := newCompleter()
						sendDone.Add(1)
						if err := c.devs[0].SendRendezvous(eagerHeader(src, dst, int32(i)), payloadFor(src, dst, i, 200<<10+i), done); err != nil {
							t.Error(err)
						}
						go func() {
							defer sendDone.Done()
							if err := done.wait(t, waitLong, "rendezvous send"); err != nil {
								t.Error(err)
							}
						}()
					} else if err := c.devs[0].SendEager(eagerHeader(src, dst, int32(i)), payloadFor(src, dst, i, i*97), nil); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	sendDone.Wait()
	for node := 1; node < 3; node++ {
		s := c.sinks[node]
		s.wait(t, waitLong, "eager messages", func() bool { return len(s.eager) == 3*per*3/4 })
		for _, in := range s.eager {
			i := int(in.Header.Tag)
			if !bytes.Equal(in.Payload, payloadFor(in.Header.Source, in.Header.Dest, i, i*97)) {
				t.Fatalf("eager %d differs", i)
			}
			in.Done()
		}
		for range 3 * per / 4 {
			r := <-rcv[node]
			if r.err != nil || !bytes.Equal(r.buf, payloadFor(r.h.Source, r.h.Dest, int(r.h.Tag), 200<<10+int(r.h.Tag))) {
				t.Fatalf("rendezvous %d to node %d: err %v or bytes differ", r.h.Tag, node, r.err)
			}
		}
	}
}

func TestFlowControl(t *testing.T) {
	const eager = 32 << 10
	c := startCluster(t, 2, 1, func(i int, cfg *Config) {
		cfg.EagerLimit = eager
		cfg.UnexpectedLimit = 1 << 20
	})
	d0, s1 := c.devs[0], c.sinks[1]
	if got := d0.EagerLimit(1); got != eager {
		t.Fatalf("EagerLimit at start = %d, want %d", got, eager)
	}
	sent := 0
	for d0.EagerLimit(1) > 0 {
		if sent > 1000 {
			t.Fatal("EagerLimit never dropped to 0")
		}
		if err := d0.SendEager(eagerHeader(0, 1, int32(sent)), make([]byte, eager), nil); err != nil {
			t.Fatal(err)
		}
		sent++
	}
	// bounded: the unexpected bytes the receiver holds stay under the grant
	if held := sent * (eager + creditOverhead); held > 1<<20 {
		t.Fatalf("receiver may hold %d bytes, over the 1 MiB limit", held)
	}
	s1.wait(t, waitLong, "held messages", func() bool { return len(s1.eager) == sent })
	if d0.EagerLimit(1) != 0 {
		t.Fatal("EagerLimit recovered while the receiver still holds every message")
	}
	// rendezvous still goes through while eager credit is exhausted
	got := clearOnRTS(t, c, 1)
	done := newCompleter()
	if err := d0.SendRendezvous(eagerHeader(0, 1, -1), []byte("rendezvous"), done); err != nil {
		t.Fatal(err)
	}
	if err := done.wait(t, waitLong, "rendezvous under pressure"); err != nil {
		t.Fatal(err)
	}
	if r := <-got; string(r.buf) != "rendezvous" {
		t.Fatalf("got %q", r.buf)
	}
	s1.mu.Lock()
	held := s1.eager
	s1.eager = nil
	s1.mu.Unlock()
	for _, in := range held {
		in.Done()
	}
	waitUntil(t, waitLong, "EagerLimit to recover after Release", func() bool { return d0.EagerLimit(1) == eager })
}

// TestCreditRace: a correct node whose ranks send eager messages at full speed, more senders at once than it has
// ranks (as a rank's extra goroutines or the worker pool may), and choose eager or rendezvous by EagerLimit as the
// rank layer does, never trips the receiver's bound on what it holds, over a window of a few messages that the
// receiver keeps full by releasing late. Every message arrives once, in order per sender, with its payload.
func TestCreditRace(t *testing.T) {
	const rpn, senders, per, eager = 4, 8, 300, 2 << 10
	release := make(chan *device.Inbound, senders*per)
	go func() { // the receiver releases late, from another goroutine: the window stays full
		for in := range release {
			in.Done()
		}
	}()
	t.Cleanup(func() { close(release) }) // after the devices' Close (cleanups run last first): no send is left
	c := startCluster(t, 2, rpn, func(i int, cfg *Config) {
		cfg.EagerLimit = eager
		cfg.UnexpectedLimit = 8 * (eager + creditOverhead)
	})
	d0, d1, s1 := c.devs[0], c.devs[1], c.sinks[1]
	size := func(g, i int) int { return (g*7919 + i*104729) % (eager + 1) }
	var (
		mu                    sync.Mutex
		next                  [senders]int
		bad                   string
		eagers, rdvs, arrived atomic.Int64
		maxHeld               atomic.Int64
	)
	// check runs in the receiving loop, at each message's header: arrivals from one sender keep its order.
	check := func(h *device.Header) (g, i int) {
		g, i = int(h.Tag>>16), int(h.Tag&0xffff)
		mu.Lock()
		if bad == "" && (g >= senders || next[g] != i || h.Source != c.rank(0, g/2) || h.Dest != c.rank(1, g%rpn)) {
			bad = fmt.Sprintf("%d->%d tag %#x arrived, want sender %d's message %d", h.Source, h.Dest, h.Tag, g, next[g%senders])
		}
		next[g%senders]++
		mu.Unlock()
		return g, i
	}
	verify := func(g, i int, b []byte) {
		if !bytes.Equal(b, payloadFor(c.rank(0, g/2), c.rank(1, g%rpn), i, size(g, i))) {
			mu.Lock()
			if bad == "" {
				bad = fmt.Sprintf("sender %d's message %d: payload of %d bytes differs", g, i, len(b))
			}
			mu.Unlock()
		}
		arrived.Add(1)
		s1.poke()
	}
	s1.mu.Lock()
	s1.onEager = func(in *device.Inbound) bool {
		if h := d1.peers[0].held.Load(); h > maxHeld.Load() {
			maxHeld.Store(h)
		}
		g, i := check(&in.Header)
		eagers.Add(1)
		verify(g, i, in.Payload)
		release <- in
		return true
	}
	s1.onRTS = func(h *device.Header) bool {
		g, i := check(h)
		rdvs.Add(1)
		buf := make([]byte, h.Length)
		if err := d1.ClearToSend(h, buf, completerFunc(func(err error) {
			if err != nil {
				t.Errorf("rendezvous: %v", err)
			}
			verify(g, i, buf)
		})); err != nil {
			t.Errorf("ClearToSend: %v", err)
		}
		return true
	}
	s1.mu.Unlock()
	var wg sync.WaitGroup
	for g := range senders {
		src, dst := c.rank(0, g/2), c.rank(1, g%rpn)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				n := size(g, i)
				h := eagerHeader(src, dst, int32(g<<16|i))
				var err error
				if lim := d0.EagerLimit(int(dst)); lim > 0 && n <= lim {
					err = d0.SendEager(h, payloadFor(src, dst, i, n), nil)
				} else { // a rank waits for its rendezvous send (the receiver clears it at once)
					h.Kind = device.KindRTS
					done := newCompleter()
					if err = d0.SendRendezvous(h, payloadFor(src, dst, i, n), done); err == nil {
						err = done.wait(t, waitLong, "a rendezvous send")
					}
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	s1.wait(t, waitLong, "every message", func() bool { return arrived.Load() == senders*per || len(s1.lost) > 0 })
	for i, s := range c.sinks {
		if _, _, lost := s.counts(); lost != 0 {
			t.Fatalf("node %d lost its peer: %v", i, s.lost[0].err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if bad != "" {
		t.Fatal(bad)
	}
	t.Logf("%d eager, %d rendezvous; held at most %d of the %d allowed (window %d)", eagers.Load(), rdvs.Load(),
		maxHeld.Load(), d1.peers[0].heldMax, d1.window)
}

func TestStripesKeepOrder(t *testing.T) {
	const stripes = 4
	c := startCluster(t, 2, 4, func(i int, cfg *Config) { cfg.Stripes = stripes })
	for i, d := range c.devs {
		if n := d.Stats().Conns; n != stripes {
			t.Fatalf("node %d has %d connections, want %d", i, n, stripes)
		}
	}
	const per = 200
	var wg sync.WaitGroup
	for l := range 4 {
		src := c.rank(0, l)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				for dl := range 4 {
					dst := c.rank(1, dl)
					if err := c.devs[0].SendEager(eagerHeader(src, dst, int32(i)), payloadFor(src, dst, i, 16), nil); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	s := c.sinks[1]
	s.wait(t, waitLong, "all messages", func() bool { return len(s.eager) == 16*per })
	next := map[[2]int32]int32{}
	for _, in := range s.eager {
		k := [2]int32{in.Header.Source, in.Header.Dest}
		if in.Header.Tag != next[k] {
			t.Fatalf("pair %v: tag %d, want %d", k, in.Header.Tag, next[k])
		}
		next[k]++
		in.Done()
	}
	used := map[int]bool{}
	for src := range int32(4) {
		for dst := int32(4); dst < 8; dst++ {
			used[stripeOf(src, dst, stripes)] = true
		}
	}
	if len(used) < 2 {
		t.Fatalf("the pairs used only %d stripe(s)", len(used))
	}
}

func TestLazy(t *testing.T) {
	c := startCluster(t, 3, 2, func(i int, cfg *Config) { cfg.Lazy = true; cfg.Stripes = 2 })
	for _, d := range c.devs {
		if n := d.Stats().Conns; n != 0 {
			t.Fatalf("lazy device connected %d before any send", n)
		}
	}
	var wg sync.WaitGroup
	const per = 100
	for node := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				for to := range 3 {
					if to == node {
						continue
					}
					src, dst := c.rank(node, i%2), c.rank(to, (i/2)%2)
					if err := c.devs[node].SendEager(eagerHeader(src, dst, int32(i)), payloadFor(src, dst, i, 10), nil); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	for node, s := range c.sinks {
		s.wait(t, waitLong, "lazy messages at node "+strconv.Itoa(node), func() bool { return len(s.eager) == 2*per })
		last := map[[2]int32]int32{}
		for _, in := range s.eager {
			k := [2]int32{in.Header.Source, in.Header.Dest}
			if prev, ok := last[k]; ok && in.Header.Tag <= prev {
				t.Fatalf("pair %v out of order: %d after %d", k, in.Header.Tag, prev)
			}
			last[k] = in.Header.Tag
			in.Done()
		}
	}
}

func TestCloseFlushes(t *testing.T) {
	c := startCluster(t, 2, 1, func(i int, cfg *Config) { cfg.ChunkSize = 256 << 10 })
	got := clearOnRTS(t, c, 1)
	const n = 3000
	dones := make([]completer, 4)
	for i := range n {
		if err := c.devs[0].SendEager(eagerHeader(0, 1, int32(i)), payloadFor(0, 1, i, 4096), nil); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 0 {
			k := i / 1000
			dones[k] = newCompleter()
			if err := c.devs[0].SendRendezvous(eagerHeader(0, 1, -int32(k)-1), payloadFor(0, 1, k, 2<<20), dones[k]); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The sink holds every eager message until the end: 3000 of 4 KiB (12 MiB with their overheads) stay under the
	// default credit toward one peer (64 MiB), so credit is not what limits this test.
	if err := c.devs[0].Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.devs[0].Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := c.devs[0].SendEager(eagerHeader(0, 1, 0), nil, nil); !errors.Is(err, device.ErrClosed) {
		t.Fatalf("send after Close: %v", err)
	}
	for k := 0; k < 3; k++ {
		if err := dones[k].wait(t, waitLong, "rendezvous completion"); err != nil {
			t.Fatal(err)
		}
	}
	s := c.sinks[1]
	s.wait(t, waitLong, "every eager message", func() bool { return len(s.eager) == n })
	for i, in := range s.eager {
		if int(in.Header.Tag) != i || !bytes.Equal(in.Payload, payloadFor(0, 1, i, 4096)) {
			t.Fatalf("message %d wrong", i)
		}
		in.Done()
	}
	for range 3 {
		r := <-got
		if !bytes.Equal(r.buf, payloadFor(0, 1, int(-r.h.Tag-1), 2<<20)) {
			t.Fatal("rendezvous payload differs")
		}
	}
	if err := c.devs[1].Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, lost := s.counts(); lost != 0 {
		t.Fatalf("a clean close was reported as a loss: %v", s.lost[0].err)
	}
	if _, _, lost := c.sinks[0].counts(); lost != 0 {
		t.Fatalf("a clean close was reported as a loss: %v", c.sinks[0].lost[0].err)
	}
}

// TestWriteTurnStress: six ranks of one node stream eager messages of every size up to 24 KiB to two ranks of
// another, all on one connection. The receiver holds its first delivery until 2000 messages are sent, so that the
// socket fills: direct writes stop part way (their rest must go before the frames others queued meanwhile),
// most frames are queued while another sender holds the write turn, and they go out many per writev, by the holder
// or by the loop on EPOLLOUT. Every message arrives once, in order per pair, with its payload; the senders wait for
// credit as ranks do (EagerLimit), and the receiver releases each message at once.
func TestWriteTurnStress(t *testing.T) {
	const senders, per, maxLen = 6, 1500, 24 << 10
	c := startCluster(t, 2, senders, func(i int, cfg *Config) { cfg.EagerLimit = maxLen })
	size := func(src, dst int32, i int) int { return (int(src)*7919 + int(dst)*31 + i*104729) % (maxLen + 1) }
	var mu sync.Mutex
	next := map[[2]int32]int{}
	bad := ""
	got := 0
	s1 := c.sinks[1]
	gate := make(chan struct{})
	var sent atomic.Int64
	s1.mu.Lock()
	s1.onEager = func(in *device.Inbound) bool {
		<-gate
		k := [2]int32{in.Header.Source, in.Header.Dest}
		mu.Lock()
		i := next[k]
		next[k]++
		if bad == "" && (int(in.Header.Tag) != i || !bytes.Equal(in.Payload, payloadFor(k[0], k[1], i, size(k[0], k[1], i)))) {
			bad = fmt.Sprintf("pair %v: message %d arrived as tag %d (%d bytes)", k, i, in.Header.Tag, len(in.Payload))
		}
		got++
		mu.Unlock()
		in.Done()
		s1.poke()
		return true
	}
	s1.mu.Unlock()
	var wg sync.WaitGroup
	for l := 0; l < senders; l++ {
		src := c.rank(0, l)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				dst, j := c.rank(1, i%2), i/2
				n := size(src, dst, j)
				deadline := time.Now().Add(waitLong)
				for c.devs[0].EagerLimit(int(dst)) < n {
					if time.Now().After(deadline) {
						t.Error("the credit never came back")
						return
					}
					runtime.Gosched()
				}
				if err := c.devs[0].SendEager(eagerHeader(src, dst, int32(j)), payloadFor(src, dst, j, n), nil); err != nil {
					t.Error(err)
					return
				}
				if sent.Add(1) == 2000 { // well within the credit (64 MiB): the socket is full by now
					close(gate)
				}
			}
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(waitLong)
	for {
		mu.Lock()
		g := got
		mu.Unlock()
		if g == senders*per {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages arrived", g, senders*per)
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if bad != "" {
		t.Fatal(bad)
	}
}

// TestPartialWriteGoesFirst: a direct write that the socket takes only part of leaves its rest at the head of the
// queue, before the frames other senders queued while it was writing; the stream stays whole. The receiver does
// not read until the writes are done, so that the first frame, larger than the socket's buffers, stops part way.
func TestPartialWriteGoesFirst(t *testing.T) {
	const big = 16 << 20
	c := startCluster(t, 2, 2, func(i int, cfg *Config) { cfg.EagerLimit = big })
	d0, s1 := c.devs[0], c.sinks[1]
	gate := make(chan struct{})
	s1.mu.Lock()
	s1.onEager = func(*device.Inbound) bool {
		<-gate
		return false
	}
	s1.mu.Unlock()
	var queued atomic.Bool
	hook := func(c *conn) {
		if c.d != d0 || !queued.CompareAndSwap(false, true) {
			return
		}
		// On the writing goroutine, once: another rank's frame arrives while the big one is being written.
		if err := d0.SendEager(eagerHeader(1, 2, 1), payloadFor(1, 2, 1, 100), nil); err != nil {
			t.Error(err)
		}
	}
	afterDirectWrite.Store(&hook)
	defer afterDirectWrite.Store(nil)
	// One frame to warm the connection, then the big one from rank 0 to rank 3.
	if err := d0.SendEager(eagerHeader(0, 3, 0), payloadFor(0, 3, 0, big), nil); err != nil {
		t.Fatal(err)
	}
	if !queued.Load() {
		t.Fatal("the big frame was not written directly")
	}
	close(gate)
	s1.wait(t, waitLong, "both messages", func() bool { return len(s1.eager) == 2 })
	s1.mu.Lock()
	defer s1.mu.Unlock()
	for _, in := range s1.eager {
		i := int(in.Header.Tag)
		n := map[int]int{0: big, 1: 100}[i]
		if !bytes.Equal(in.Payload, payloadFor(in.Header.Source, in.Header.Dest, i, n)) {
			t.Fatalf("message %d (%d bytes) arrived damaged", i, len(in.Payload))
		}
		in.Done()
	}
}

// testHelper is a device.Helper that checks its calls: Round and Help alternate, on one goroutine at a time; after
// it is armed, the first Help past a delivery runs check and sends its verdict.
type testHelper struct {
	inRound   atomic.Bool
	delivered func() bool
	check     func() error
	once      atomic.Bool
	after     chan error
}

func (h *testHelper) Round() {
	if h.inRound.Swap(true) {
		h.report(errors.New("Round twice without Help"))
	}
}

func (h *testHelper) Help() bool {
	if !h.inRound.Swap(false) {
		h.report(errors.New("Help without Round"))
	}
	if h.delivered() {
		h.report(h.check())
	}
	return false
}

func (h *testHelper) report(err error) {
	if h.once.CompareAndSwap(false, true) {
		h.after <- err
	}
}

// TestSetHelper: the loop calls its helper's Round before each round and Help after it, outside its lock, also after
// the round that delivered a message, with no rank polling the device.
func TestSetHelper(t *testing.T) {
	c := startCluster(t, 2, 1, nil)
	s := c.sinks[1]
	d := c.devs[1]
	h := &testHelper{after: make(chan error, 1),
		delivered: func() bool { eager, _, _ := s.counts(); return eager > 0 },
		check: func() error {
			if !d.pollMu.TryLock() {
				return errors.New("Help runs with the device's lock held")
			}
			d.pollMu.Unlock()
			return nil
		}}
	d.SetHelper(h)
	if err := c.devs[0].SendEager(eagerHeader(0, 1, 5), []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-h.after:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitLong):
		t.Fatal("the loop did not call Help after delivering a message")
	}
}

// TestSenderLeavesStreams: a stream queued while a rank's send holds the write turn (the loop cleared it: the
// peer's CTS came) is the loop's to write, not the sender's; the send returns with its own frame out and the stream
// untouched, and the loop then writes it whole. The loop is held off (its lock taken) from the moment the stream
// is queued until the send has returned, so whatever was written of the stream meanwhile the sender wrote.
func TestSenderLeavesStreams(t *testing.T) {
	const big = 4 << 20
	c := startCluster(t, 2, 2, nil)
	d0, d1, s1 := c.devs[0], c.devs[1], c.sinks[1]
	goCTS := make(chan struct{})
	recvd := newCompleter()
	dst := make([]byte, big)
	s1.mu.Lock()
	s1.onRTS = func(h *device.Header) bool {
		<-goCTS
		if err := d1.ClearToSend(h, dst, recvd); err != nil {
			t.Error(err)
		}
		return true
	}
	s1.mu.Unlock()
	sent := newCompleter()
	src := payloadFor(0, 2, 0, big)
	if err := d0.SendRendezvous(eagerHeader(0, 2, 0), src, sent); err != nil {
		t.Fatal(err)
	}
	var armed, held atomic.Bool
	armed.Store(true)
	hook := func(cn *conn) {
		if cn.d != d0 || !armed.CompareAndSwap(true, false) {
			return
		}
		// On the sender's goroutine, inside its turn: let the CTS come, and wait until the loop has queued the
		// stream and asked the turn's holder to flush.
		close(goCTS)
		deadline := time.Now().Add(waitLong)
		for {
			cn.mu.Lock()
			queued := false
			for i := cn.q.head; i < len(cn.q.segs); i++ {
				queued = queued || cn.q.segs[i].rdv != nil
			}
			ready := queued && cn.flushWanted
			cn.mu.Unlock()
			if ready {
				break
			}
			if time.Now().After(deadline) {
				t.Error("the stream was not queued while the send held the turn")
				return
			}
			runtime.Gosched()
		}
		d0.pollMu.Lock() // the loop has handled the CTS; it now waits until the send has returned
		held.Store(true)
	}
	afterDirectWrite.Store(&hook)
	defer afterDirectWrite.Store(nil)
	if err := d0.SendEager(eagerHeader(1, 3, 1), payloadFor(1, 3, 1, 100), nil); err != nil {
		t.Fatal(err)
	}
	if !held.Load() {
		t.Fatal("the hook did not run")
	}
	var written int = -1
	cn := d0.peers[1].slots[0]
	cn.mu.Lock()
	for i := cn.q.head; i < len(cn.q.segs); i++ {
		if r := cn.q.segs[i].rdv; r != nil {
			written = r.sent
			if r.inChunk {
				written += r.hoff + 1 // a chunk's header under way counts as written
			}
		}
	}
	cn.mu.Unlock()
	d0.pollMu.Unlock()
	if written != 0 {
		t.Fatalf("the sender wrote %d bytes of the stream (-1: all of it) before its send returned", written)
	}
	if err := sent.wait(t, waitLong, "the stream's send"); err != nil {
		t.Fatal(err)
	}
	if err := recvd.wait(t, waitLong, "the stream's receive"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst, src) {
		t.Fatal("the stream arrived damaged")
	}
}

// TestPollYields: a driving rank whose Polls find nothing gives its core away (schedYield) once every yieldEvery
// of them in a row (one that finds the device held counts as finding nothing), and a Poll that finds something
// starts the count again.
func TestPollYields(t *testing.T) {
	var yields atomic.Int32
	old := schedYield
	schedYield = func() { yields.Add(1) }
	defer func() { schedYield = old }()
	c := startCluster(t, 2, 1, nil)
	d := c.devs[1]
	d.Enter()
	defer d.Leave(true)
	waitUntil(t, waitLong, "the loop to stand down", func() bool { return d.standing.Load() })
	// pollUntil polls until yields reaches want and returns how many Polls it took.
	pollUntil := func(want int32) int {
		for n := 1; n <= 1000*yieldEvery; n++ {
			if d.Poll() {
				t.Fatal("a Poll of an idle device found something")
			}
			if yields.Load() == want {
				return n
			}
		}
		t.Fatalf("%d empty Polls in a row yielded %d times, want %d", 1000*yieldEvery, yields.Load(), want)
		return 0
	}
	if n := pollUntil(3); n < 3*yieldEvery {
		t.Fatalf("%d empty Polls in a row yielded 3 times; want one yield per %d", n, yieldEvery)
	}
	for range yieldEvery - 1 {
		d.Poll()
	}
	if err := c.devs[0].SendEager(eagerHeader(0, 1, 5), []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitLong)
	for !d.Poll() {
		if time.Now().After(deadline) {
			t.Fatal("the message did not arrive")
		}
	}
	yields.Store(0)
	if n := pollUntil(1); n < yieldEvery {
		t.Fatalf("the first %d empty Polls after one that found a message yielded; want %d first", n, yieldEvery)
	}
}

//go:build linux

package netdev

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/netdev/auth"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv("GOMPJ_NETDEV_CHILD"); addr != "" {
		os.Exit(childMain(addr))
	}
	os.Exit(m.Run())
}

// childMain is node 1 of a two-node job whose node 0 (the test) listens at addr: it connects, sends one message,
// says "ready" and waits to be killed.
func childMain(addr string) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 2
	}
	d, err := newStarted(Config{Node: 1, Ranks: 2, NodeOf: func(r int) int { return r }, Secret: testSecret, Listener: ln},
		newSink(), []string{addr, ln.Addr().String()})
	if err != nil {
		os.Stderr.WriteString(err.Error())
		return 2
	}
	if err := d.WaitConnected(10 * time.Second); err != nil {
		os.Stderr.WriteString(err.Error())
		return 2
	}
	if err := d.SendEager(&device.Header{Source: 1, Dest: 0}, []byte("child"), nil); err != nil {
		return 2
	}
	os.Stdout.WriteString("ready\n")
	select {}
}

func TestPeerDeathSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := newSink()
	d, err := newStarted(Config{Node: 0, Ranks: 2, NodeOf: func(r int) int { return r }, Secret: testSecret, Listener: ln},
		s, []string{ln.Addr().String(), "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GOMPJ_NETDEV_CHILD="+ln.Addr().String())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("child: %q %v", line, err)
	}
	s.wait(t, waitLong, "the child's message", func() bool { return len(s.eager) == 1 })
	// a rendezvous to the child that it will never clear: it must fail when the child dies
	pending := newCompleter()
	if err := d.SendRendezvous(&device.Header{Source: 0, Dest: 1}, make([]byte, 1<<20), pending); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s.wait(t, 5*time.Second, "PeerLost after SIGKILL", func() bool { return len(s.lost) > 0 })
	t.Logf("PeerLost %v after SIGKILL: %v", time.Since(killed), s.lost[0].err)
	if s.lost[0].node != 1 || !errors.Is(s.lost[0].err, ErrPeerLost) || !strings.Contains(s.lost[0].err.Error(), "node 1") {
		t.Fatalf("PeerLost(%d, %v)", s.lost[0].node, s.lost[0].err)
	}
	if err := pending.wait(t, waitLong, "the pending send"); !errors.Is(err, ErrPeerLost) {
		t.Fatalf("pending send completed with %v", err)
	}
	if err := d.SendEager(&device.Header{Source: 0, Dest: 1}, nil, nil); !errors.Is(err, ErrPeerLost) {
		t.Fatalf("send to the dead node: %v", err)
	}
	cmd.Wait()
	s.mu.Lock()
	n := len(s.lost)
	s.mu.Unlock()
	if n != 1 {
		t.Fatalf("PeerLost reported %d times", n)
	}
}

func TestPeerDeathInProcess(t *testing.T) {
	c := startCluster(t, 3, 1, nil)
	pending := newCompleter()
	if err := c.devs[0].SendRendezvous(eagerHeader(0, 2, 1), make([]byte, 100), pending); err != nil {
		t.Fatal(err)
	}
	sync := newCompleter()
	h := eagerHeader(0, 2, 2)
	h.Flags = device.FlagSync
	if err := c.devs[0].SendEager(h, []byte("x"), sync); err != nil {
		t.Fatal(err)
	}
	c.sinks[2].wait(t, waitLong, "the rts and the sync message", func() bool {
		return len(c.sinks[2].rts) == 1 && len(c.sinks[2].eager) == 1
	})
	c.devs[2].crash()
	for _, i := range []int{0, 1} {
		s := c.sinks[i]
		s.wait(t, 5*time.Second, "PeerLost", func() bool { return len(s.lost) == 1 })
		if s.lost[0].node != 2 {
			t.Fatalf("node %d: PeerLost(%d, %v)", i, s.lost[0].node, s.lost[0].err)
		}
	}
	for _, cm := range []completer{pending, sync} {
		if err := cm.wait(t, waitLong, "a pending send"); !errors.Is(err, ErrPeerLost) {
			t.Fatalf("pending send completed with %v", err)
		}
	}
	// the survivors still talk
	if err := c.devs[0].SendEager(eagerHeader(0, 1, 9), []byte("ok"), nil); err != nil {
		t.Fatal(err)
	}
	c.sinks[1].wait(t, waitLong, "message between survivors", func() bool { return len(c.sinks[1].eager) == 1 })
}

// oneDevice starts node 0 of a two-node job (node 1 is the test) with ranks 0,1 on node 0 and 2,3 on node 1.
func oneDevice(t *testing.T, mod func(*Config)) (*Device, *sink) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := newSink()
	cfg := Config{Node: 0, Ranks: 4, NodeOf: func(r int) int { return r / 2 },
		Secret: testSecret, Listener: ln, HandshakeTimeout: time.Second, EagerLimit: 1024}
	if mod != nil {
		mod(&cfg)
	}
	d, err := newStarted(cfg, s, []string{ln.Addr().String(), "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, s
}

// impostor connects to d as node 1 with the job secret.
func impostor(t *testing.T, d *Device) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", d.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.Dial(nc, testSecret, Purpose, auth.Hello{From: 1, To: 0}, time.Second); err != nil {
		t.Fatal(err)
	}
	return nc
}

func rawHeader(h device.Header, credit uint32) []byte {
	b := make([]byte, HeaderSize)
	putHeader(b, &h, credit)
	return b
}

func TestBadFrameFromPeer(t *testing.T) {
	cases := map[string][]byte{
		"unknown kind":        rawHeader(device.Header{Kind: 9, Source: 2, Dest: 0}, 0),
		"dest on other node":  rawHeader(device.Header{Kind: device.KindEager, Source: 2, Dest: 3}, 0),
		"source out of range": rawHeader(device.Header{Kind: device.KindEager, Source: 99, Dest: 0}, 0),
		"eager over limit":    rawHeader(device.Header{Kind: device.KindEager, Source: 2, Dest: 0, Length: 1 << 40}, 0),
		"cts unknown seq":     rawHeader(device.Header{Kind: device.KindCTS, Source: 0, Dest: 2, Seq: 77}, 0),
		"data unknown seq":    rawHeader(device.Header{Kind: device.KindData, Source: 2, Dest: 0, Length: 10, Seq: 5}, 0),
		"ack unknown seq":     rawHeader(device.Header{Kind: device.KindAck, Source: 0, Dest: 2, Seq: 5}, 0),
		"unknown flags":       rawHeader(device.Header{Kind: device.KindEager, Flags: 0x80, Source: 2, Dest: 0}, 0),
		"bad version": func() []byte {
			b := rawHeader(device.Header{Kind: device.KindEager, Source: 2, Dest: 0}, 0)
			b[3] = 7
			return b
		}(),
		"garbage": []byte(strings.Repeat("\xff", 100)),
	}
	for name, frame := range cases {
		t.Run(name, func(t *testing.T) {
			d, s := oneDevice(t, nil)
			nc := impostor(t, d)
			defer nc.Close()
			// one good frame first: it must be delivered, the bad one must not
			nc.Write(append(rawHeader(device.Header{Kind: device.KindEager, Source: 2, Dest: 1, Length: 2}, 0), 'o', 'k'))
			nc.Write(frame)
			s.wait(t, 5*time.Second, "PeerLost", func() bool { return len(s.lost) == 1 })
			if s.lost[0].node != 1 || !errors.Is(s.lost[0].err, ErrFrame) || !strings.Contains(s.lost[0].err.Error(), "node 1") {
				t.Fatalf("PeerLost(%d, %v)", s.lost[0].node, s.lost[0].err)
			}
			t.Log(s.lost[0].err)
			if e, r, _ := s.counts(); e != 1 || r != 0 {
				t.Fatalf("delivered eager %d rts %d", e, r)
			}
			nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.ReadAll(nc); err != nil {
				t.Fatalf("the device did not close the connection: %v", err)
			}
		})
	}
}

func TestStrangers(t *testing.T) {
	// Only node 1, which the strangers call, has a short handshake timeout (for the silent stranger below). Node 1
	// dials node 0 (node i dials nodes j < i), so no real connection is ever accepted by node 1: each rejection
	// it counts is a stranger's, and none of them can be a slow real handshake timing out.
	c := startCluster(t, 2, 1, func(i int, cfg *Config) {
		if i == 1 {
			cfg.HandshakeTimeout = 300 * time.Millisecond
		}
	})
	d := c.devs[1]
	addr := d.Addr().String()
	base := d.Stats().Rejected // 0: the mesh is up (startCluster waited for it), and node 1 accepted none of it
	expectRejected := func(n int64) {
		t.Helper()
		waitUntil(t, waitLong, "the handshake to be rejected", func() bool { return d.Stats().Rejected >= base+n })
		if got := d.Stats().Rejected - base; got != n {
			t.Fatalf("%d handshakes rejected, want %d", got, n)
		}
	}
	// garbage
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	nc.Write([]byte(strings.Repeat("GET / HTTP/1.1\r\n", 20)))
	expectRejected(1)
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, _ := io.ReadAll(nc)
	if len(got) != 40 {
		t.Fatalf("the stranger got %d bytes, want only the 40-byte challenge", len(got))
	}
	nc.Close()
	// right shape, wrong MAC
	nc, _ = net.Dial("tcp", addr)
	ch := make([]byte, 40) // the handshake challenge, not a frame header
	io.ReadFull(nc, ch)
	ans := make([]byte, 84)
	copy(ans, ch[:8])
	binary.LittleEndian.PutUint32(ans[40:], 0)
	binary.LittleEndian.PutUint32(ans[44:], 1)
	nc.Write(ans)
	expectRejected(2)
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if rest, _ := io.ReadAll(nc); len(rest) != 0 {
		t.Fatalf("a wrong MAC got %d bytes back", len(rest))
	}
	nc.Close()
	// wrong secret through the real handshake
	nc, _ = net.Dial("tcp", addr)
	if err := auth.Dial(nc, []byte("not-the-secret-at-all-0000"), Purpose, auth.Hello{From: 0, To: 1}, time.Second); !errors.Is(err, auth.ErrAuth) {
		t.Fatalf("wrong secret: %v", err)
	}
	nc.Close()
	expectRejected(3)
	// right secret, impossible identity
	nc, _ = net.Dial("tcp", addr)
	auth.Dial(nc, testSecret, Purpose, auth.Hello{From: 7, To: 1}, time.Second)
	nc.Close()
	expectRejected(4)
	// silent: times out
	nc, _ = net.Dial("tcp", addr)
	expectRejected(5)
	nc.Close()

	if e, r, l := c.sinks[1].counts(); e+r+l != 0 {
		t.Fatalf("strangers caused deliveries: eager %d rts %d lost %d", e, r, l)
	}
	if err := c.devs[0].SendEager(eagerHeader(0, 1, 1), []byte("still fine"), nil); err != nil {
		t.Fatal(err)
	}
	s := c.sinks[1]
	s.wait(t, waitLong, "a real message", func() bool { return len(s.eager) == 1 })
	if string(s.eager[0].Payload) != "still fine" {
		t.Fatalf("got %q", s.eager[0].Payload)
	}
}

func TestEagerZeroAlloc(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	c := startCluster(t, 2, 1, nil)
	got := make(chan struct{}, 1)
	s := c.sinks[1]
	s.mu.Lock()
	s.onEager = func(in *device.Inbound) bool {
		in.Done()
		got <- struct{}{}
		return true
	}
	s.mu.Unlock()
	h := eagerHeader(0, 1, 1)
	payload := make([]byte, 1000)
	send := func() {
		if err := c.devs[0].SendEager(h, payload, nil); err != nil {
			t.Fatal(err)
		}
		<-got
	}
	for range 100 {
		send()
	}
	if a := testing.AllocsPerRun(2000, send); a != 0 {
		t.Fatalf("%v allocations per eager message", a)
	}
	// In pieces (device.Segmented): tiny ones are staged (packed just before the write), large ones go out with
	// writev. Neither allocates: judging the pieces' size once did, a list of them escaping per message.
	for _, blk := range []int{8, 2048} {
		sp := &stridedPieces{buf: make([]byte, 64<<10), blk: blk, stride: 2 * blk}
		p := device.Payload{Segs: sp, Len: 16 << 10}
		sendv := func() {
			if err := c.devs[0].SendEagerv(h, p, nil); err != nil {
				t.Fatal(err)
			}
			<-got
		}
		for range 100 {
			sendv()
		}
		if a := testing.AllocsPerRun(1000, sendv); a != 0 {
			t.Fatalf("%v allocations per eager message in pieces of %d bytes", a, blk)
		}
	}
}

// TestForgedCTSLonger: a CTS may shorten a rendezvous message (a truncated receive), never stretch it: one asking
// for more bytes than the message has fails the peer as a bad frame and the send with it, sending nothing.
func TestForgedCTSLonger(t *testing.T) {
	d, s := oneDevice(t, nil)
	nc := impostor(t, d)
	defer nc.Close()
	const size = 10 << 10
	h := &device.Header{Kind: device.KindRTS, Type: 1, Context: 3, Source: 0, Dest: 2, SrcRank: 0, Tag: 7, Length: size}
	done := newCompleter()
	if err := d.SendRendezvous(h, make([]byte, size), done); err != nil {
		t.Fatal(err)
	}
	cts := *h
	cts.Kind, cts.Seq, cts.Length = device.KindCTS, 1, size+1
	nc.Write(rawHeader(cts, 0))
	s.wait(t, 5*time.Second, "PeerLost", func() bool { return len(s.lost) == 1 })
	if s.lost[0].node != 1 || !errors.Is(s.lost[0].err, ErrFrame) {
		t.Fatalf("PeerLost(%d, %v)", s.lost[0].node, s.lost[0].err)
	}
	if err := done.wait(t, 5*time.Second, "the send"); err == nil {
		t.Fatal("the send completed without error")
	}
}

// TestCreditOverWindow: a peer that returns more credit than is out toward it (a bug: it would have us overrun its
// buffers) is a bad frame; what it owes back is accepted.
func TestCreditOverWindow(t *testing.T) {
	d, c, _ := offlineConn(t)
	p := c.p
	p.credit.Store(d.window - 100) // 100 bytes of ours are out
	h := device.Header{Kind: device.KindEager, Source: 2, Dest: 1, Length: 0}
	if _, err := c.header(&h, 100); err != nil {
		t.Fatalf("the credit owed back: %v", err)
	}
	if _, err := c.header(&h, 1); !errors.Is(err, ErrFrame) {
		t.Fatalf("credit past the window: %v, want ErrFrame", err)
	}
}

// TestHeldBound: a peer's unreleased eager cost may reach exactly window + its overdraft (node 1 has 2 ranks: one
// message of the largest cost), not a byte more; a release makes room again.
func TestHeldBound(t *testing.T) {
	d, c, _ := offlineConn(t)
	p := c.p
	const most = 1024 + creditOverhead
	if want := d.window + most; p.heldMax != want {
		t.Fatalf("heldMax %d, want the window %d plus one message of %d", p.heldMax, d.window, most)
	}
	if d.overdraft != most {
		t.Fatalf("overdraft %d, want %d (node 0 has 2 ranks)", d.overdraft, most)
	}
	h := device.Header{Kind: device.KindEager, Source: 2, Dest: 1, Length: 1024}
	p.held.Store(p.heldMax - most)
	if _, err := c.header(&h, 0); err != nil {
		t.Fatalf("a message up to the bound: %v", err)
	}
	empty := device.Header{Kind: device.KindEager, Source: 3, Dest: 0}
	if _, err := c.header(&empty, 0); !errors.Is(err, ErrFrame) || !strings.Contains(err.Error(), "node 1") {
		t.Fatalf("an empty message past the bound: %v, want ErrFrame naming node 1", err)
	}
	p.held.Store(p.heldMax - most)
	d.returnCredit(2, 0) // an empty message of the peer's is released
	if _, err := c.header(&h, 0); err != nil {
		t.Fatalf("a message after a release: %v", err)
	}
	// Rendezvous takes no credit and counts nothing: DATA for a cleared receive goes through at the bound.
	data := device.Header{Kind: device.KindData, Source: 2, Dest: 1, Length: 10, Seq: 7}
	if _, err := c.header(&data, 0); err != nil {
		t.Fatalf("DATA at the bound: %v", err)
	}
	if p.held.Load() != p.heldMax-creditOverhead {
		t.Fatalf("held %d after DATA, want %d", p.held.Load(), p.heldMax-creditOverhead)
	}
}

// TestEagerFlood: a peer that writes valid eager frames without waiting for credit is failed as a bad frame once
// it passes the bound, and this node holds no more of its messages than the bound allows.
func TestEagerFlood(t *testing.T) {
	const eager, limit = 1024, 16 << 10
	d, s := oneDevice(t, func(cfg *Config) { cfg.EagerLimit, cfg.UnexpectedLimit = eager, limit })
	p := d.peers[1]
	const cost = eager + creditOverhead
	// node 1 has 2 ranks: the grant (2 nodes: the whole limit) plus one message
	if p.heldMax != limit+cost {
		t.Fatalf("heldMax %d, want %d", p.heldMax, limit+cost)
	}
	fits := int(p.heldMax / cost)
	nc := impostor(t, d)
	defer nc.Close()
	var flood []byte
	for i := range 3 * fits {
		flood = append(flood, rawHeader(device.Header{Kind: device.KindEager, Source: 2 + int32(i%2), Dest: 0, Tag: int32(i), Length: eager}, 0)...)
		flood = append(flood, make([]byte, eager)...)
	}
	nc.Write(flood) // the device may close the connection under it: its error is no news
	s.wait(t, 5*time.Second, "PeerLost", func() bool { return len(s.lost) == 1 })
	if s.lost[0].node != 1 || !errors.Is(s.lost[0].err, ErrFrame) || !errors.Is(s.lost[0].err, ErrPeerLost) ||
		!strings.Contains(s.lost[0].err.Error(), "node 1") {
		t.Fatalf("PeerLost(%d, %v)", s.lost[0].node, s.lost[0].err)
	}
	t.Log(s.lost[0].err)
	s.mu.Lock()
	var held int64
	for i, in := range s.eager {
		held += int64(len(in.Payload)) + creditOverhead
		if in.Header.Tag != int32(i) {
			t.Errorf("held message %d has tag %d", i, in.Header.Tag)
		}
	}
	n := len(s.eager)
	s.mu.Unlock()
	if n != fits || held > p.heldMax {
		t.Fatalf("holds %d messages (%d bytes with overhead), want %d within %d", n, held, fits, p.heldMax)
	}
	// The device closed the socket (with our flood unread: a reset is as good as an end).
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(nc); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the device did not close the connection: %v", err)
	}
}

// TestEagerWithoutCredit: an eager send that finds the credit spent beyond the overdraft (more racing senders than
// the node has ranks, or a caller that did not ask EagerLimit) goes by rendezvous from a copy; up to the overdraft
// it stays eager.
func TestEagerWithoutCredit(t *testing.T) {
	const eager = 1024
	d, _ := oneDevice(t, nil)
	nc := impostor(t, d)
	defer nc.Close()
	p := d.peers[1]
	p.credit.Store(eager + creditOverhead) // one message's worth: EagerLimit says yes
	if d.EagerLimit(2) != eager {
		t.Fatalf("EagerLimit %d with one message's worth of credit", d.EagerLimit(2))
	}
	// Node 0 has 2 ranks: two senders that looked at once both go eager, the credit one message below zero.
	for i := range 2 {
		if err := d.SendEager(&device.Header{Source: 0, Dest: 2, Tag: int32(i)}, make([]byte, eager), nil); err != nil {
			t.Fatal(err)
		}
	}
	if c := p.credit.Load(); c != -(eager + creditOverhead) {
		t.Fatalf("credit %d after two messages, want %d", c, -(eager + creditOverhead))
	}
	// A third finds none: a synchronous send, whose buffer the caller overwrites as soon as SendEager returns.
	buf := payloadFor(0, 2, 2, eager)
	want := append([]byte(nil), buf...)
	done := newCompleter()
	if err := d.SendEager(&device.Header{Flags: device.FlagSync, Source: 0, Dest: 2, Tag: 2}, buf, done); err != nil {
		t.Fatal(err)
	}
	clear(buf)
	lim := limits{ranks: 4, nodeOf: func(r int) int { return r / 2 }, self: 1, peer: 0, maxEager: eager, maxData: 1 << 20, maxMessage: 1 << 20}
	r := bufio.NewReader(nc)
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	next := func() device.Header {
		t.Helper()
		b := make([]byte, HeaderSize)
		if _, err := io.ReadFull(r, b); err != nil {
			t.Fatal(err)
		}
		h, _, err := decodeHeader(b, &lim)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	for i := range 2 {
		if h := next(); h.Kind != device.KindEager || h.Tag != int32(i) || h.Length != eager {
			t.Fatalf("frame %d: %+v, want eager", i, h)
		}
		r.Discard(eager)
	}
	rts := next()
	if rts.Kind != device.KindRTS || rts.Tag != 2 || rts.Length != eager || rts.Flags != 0 {
		t.Fatalf("third frame %+v, want an RTS of %d bytes without FlagSync", rts, eager)
	}
	select {
	case err := <-done:
		t.Fatalf("the synchronous send completed (%v) before its receive was matched", err)
	default:
	}
	cts := rts
	cts.Kind = device.KindCTS
	nc.Write(rawHeader(cts, 0))
	if h := next(); h.Kind != device.KindData || h.Seq != rts.Seq || h.Length != eager {
		t.Fatalf("after the CTS: %+v, want DATA of %d bytes", h, eager)
	}
	got := make([]byte, eager)
	if _, err := io.ReadFull(r, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the rendezvous carried the caller's buffer as overwritten, not the copy")
	}
	if err := done.wait(t, 5*time.Second, "the synchronous send"); err != nil {
		t.Fatal(err)
	}
	if c := p.credit.Load(); c != -(eager + creditOverhead) {
		t.Fatalf("credit %d after the rendezvous, want it untouched (%d)", c, -(eager + creditOverhead))
	}
}

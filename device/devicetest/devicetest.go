// Package devicetest is the conformance suite every gompj device passes: the rules of device.Device (order per
// source and destination under concurrency, completion exactly once, re-entrant sink callbacks, the memory and
// flow-control contract, truncated receives, Close and peer loss, and segmented payloads for devices that
// implement device.Segmented)
// checked against a small job of in-process transports.
//
// A device's own tests call Run with a Job that opens its transports; the suite starts them with its own sinks.
//
// Imports: gompj/device and the standard library (testing).
package devicetest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gompj/gompj/device"
)

// Job describes the transports under test: a job of Nodes nodes with RanksPerNode ranks each, rank r on node
// r/RanksPerNode.
type Job struct {
	Nodes        int // at least 2
	RanksPerNode int
	// Open opens node's transport of a fresh job (not started). The suite starts, connects and closes it.
	Open func(t testing.TB, node int) device.Transport
	// EagerMax is the eager limit the transports were opened with: EagerLimit with full credit.
	EagerMax int
	// HeldBound bounds the unreleased eager bytes one receiving node holds from one sender before the sender's
	// EagerLimit drops to 0 (0: no flow-control check).
	HeldBound int64
	// Kill, if set, makes node's transport vanish as a killed process would: no goodbye, nothing more sent.
	Kill func(t testing.TB, node int, tr device.Transport)
	// Timeout bounds each wait of the suite (default 20 s).
	Timeout time.Duration
}

func (j *Job) rank(node, local int) int32 { return int32(node*j.RanksPerNode + local) }
func (j *Job) nodeOf(r int32) int         { return int(r) / j.RanksPerNode }
func (j *Job) ranks() int                 { return j.Nodes * j.RanksPerNode }

// Run runs the conformance suite as subtests of t.
func Run(t *testing.T, j Job) {
	if j.Nodes < 2 || j.RanksPerNode < 1 || j.Open == nil || j.EagerMax < 0 {
		t.Fatalf("devicetest: bad job %+v", j)
	}
	if j.Timeout == 0 {
		j.Timeout = 20 * time.Second
	}
	t.Run("Lifecycle", func(t *testing.T) { testLifecycle(t, &j) })
	t.Run("OrderAndReentry", func(t *testing.T) { testOrder(t, &j, false) })
	t.Run("OrderClaimed", func(t *testing.T) { testOrder(t, &j, true) })
	t.Run("Errors", func(t *testing.T) { testErrors(t, &j) })
	t.Run("FlowControl", func(t *testing.T) { testFlow(t, &j) })
	t.Run("ClaimCredit", func(t *testing.T) { testClaimCredit(t, &j) })
	t.Run("Poller", func(t *testing.T) { testPoller(t, &j) })
	t.Run("Registrar", func(t *testing.T) { testRegistrar(t, &j) })
	t.Run("Segments", func(t *testing.T) { testSegments(t, &j) })
	t.Run("Truncation", func(t *testing.T) { testTruncation(t, &j) })
	t.Run("CloseFlushes", func(t *testing.T) { testClose(t, &j) })
	t.Run("PeerLost", func(t *testing.T) { testPeerLost(t, &j) })
}

// Sink records what a transport delivers; hooks, when set, see each event first (on the delivering goroutine)
// and may consume it.
type Sink struct {
	mu      sync.Mutex
	eager   []*device.Inbound
	rts     []*device.Header
	lost    map[int][]error
	changed chan struct{}
	onEager func(*device.Inbound) bool
	onRTS   func(*device.Header) bool
	onClaim func(*device.Header) (device.Payload, device.Completer, bool)
}

// claimSink is a Sink that also claims eager messages at their header (device.EagerClaimer), through its onClaim
// hook; the plain Sink does not, so that devices are tested both ways.
type claimSink struct{ *Sink }

// ClaimEager implements device.EagerClaimer.
func (s claimSink) ClaimEager(h *device.Header) (device.Payload, device.Completer, bool) {
	s.mu.Lock()
	f := s.onClaim
	s.mu.Unlock()
	if f == nil {
		return device.Payload{}, nil, false
	}
	return f(h)
}

func newSink() *Sink { return &Sink{changed: make(chan struct{}, 1), lost: map[int][]error{}} }

// hooks sets the sink's hooks (nil leaves one as it is).
func (s *Sink) hooks(eager func(*device.Inbound) bool, rts func(*device.Header) bool) {
	s.mu.Lock()
	if eager != nil {
		s.onEager = eager
	}
	if rts != nil {
		s.onRTS = rts
	}
	s.mu.Unlock()
}

func (s *Sink) poke() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// DeliverEager implements device.Sink.
func (s *Sink) DeliverEager(in *device.Inbound) {
	s.mu.Lock()
	h := s.onEager
	s.mu.Unlock()
	if h == nil || !h(in) {
		s.mu.Lock()
		s.eager = append(s.eager, in)
		s.mu.Unlock()
	}
	s.poke()
}

// DeliverRTS implements device.Sink.
func (s *Sink) DeliverRTS(rts *device.Header) {
	c := *rts // the device's header is valid during the call only (device.Sink)
	rts = &c
	s.mu.Lock()
	h := s.onRTS
	s.mu.Unlock()
	if h == nil || !h(rts) {
		s.mu.Lock()
		s.rts = append(s.rts, rts)
		s.mu.Unlock()
	}
	s.poke()
}

// PeerLost implements device.Sink.
func (s *Sink) PeerLost(node int, err error) {
	s.mu.Lock()
	s.lost[node] = append(s.lost[node], err)
	s.mu.Unlock()
	s.poke()
}

// wait blocks until cond (evaluated under the sink's lock) holds.
func (s *Sink) wait(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		s.mu.Lock()
		ok := cond()
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-s.changed:
		case <-timer.C:
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
	}
}

// cluster is one started job.
type cluster struct {
	j     *Job
	trs   []device.Transport
	sinks []*Sink
}

func start(t *testing.T, j *Job) *cluster { t.Helper(); return startWith(t, j, false) }

// startWith is start, with sinks that claim eager messages (claimSink) if claiming.
func startWith(t *testing.T, j *Job, claiming bool) *cluster {
	t.Helper()
	c := &cluster{j: j}
	for i := range j.Nodes {
		tr := j.Open(t, i)
		c.trs = append(c.trs, tr)
		c.sinks = append(c.sinks, newSink())
		a := tr.Address()
		if len(a) == 0 || len(a) > device.MaxAddress {
			t.Fatalf("node %d: address blob of %d bytes (1..%d)", i, len(a), device.MaxAddress)
		}
	}
	ss := sinks(c.sinks)
	if claiming {
		for i, s := range c.sinks {
			ss[i] = claimSink{s}
		}
	}
	Connect(t, c.trs, ss, j.Timeout)
	return c
}

// Connect starts the transports of one job, each with its node's sink and the other nodes' addresses, waits until
// every one is connected, and closes them all (at once, as processes would) when the test ends: the start-up of a
// device test that wires its own sinks.
func Connect(t testing.TB, trs []device.Transport, sinks []device.Sink, timeout time.Duration) {
	t.Helper()
	addrs := make([][]byte, len(trs))
	for i, tr := range trs {
		addrs[i] = bytes.Clone(tr.Address())
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, tr := range trs {
			wg.Add(1)
			go func() { defer wg.Done(); tr.Close() }()
		}
		wg.Wait()
	})
	for i, tr := range trs {
		mine := slices.Clone(addrs)
		mine[i] = nil
		if err := tr.Start(sinks[i], mine); err != nil {
			t.Fatalf("node %d: start: %v", i, err)
		}
	}
	for i, tr := range trs {
		if err := tr.WaitConnected(timeout); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
}

func sinks(ss []*Sink) []device.Sink {
	out := make([]device.Sink, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// doneFunc is a Completer that checks it is called once.
type doneFunc struct {
	n atomic.Int32
	f func(error)
}

func (d *doneFunc) Complete(err error) {
	if d.n.Add(1) != 1 {
		panic("devicetest: a Completer was called twice")
	}
	d.f(err)
}

func completer(f func(error)) *doneFunc { return &doneFunc{f: f} }

// errs collects failures seen on other goroutines, reported by the test goroutine.
type errs struct {
	mu   sync.Mutex
	list []string
}

func (e *errs) add(format string, args ...any) {
	e.mu.Lock()
	if len(e.list) < 20 {
		e.list = append(e.list, fmt.Sprintf(format, args...))
	}
	e.mu.Unlock()
}

func (e *errs) check(t testing.TB) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range e.list {
		t.Error(s)
	}
	if len(e.list) > 0 {
		t.FailNow()
	}
}

// payload is message i of pair (src, dst), n bytes, recognisable.
func payload(src, dst int32, i, n int) []byte {
	b := make([]byte, n)
	x := uint32(src)*2654435761 ^ uint32(dst)*40503 ^ uint32(i)*97
	for k := range b {
		x = x*1664525 + 1013904223
		b[k] = byte(x >> 24)
	}
	return b
}

func header(src, dst int32, tag int) *device.Header {
	return &device.Header{Kind: device.KindEager, Type: 1, Context: 4, Source: src, Dest: dst, SrcRank: src, Tag: int32(tag)}
}

func testLifecycle(t *testing.T, j *Job) {
	c := start(t, j)
	src, dst := j.rank(0, 0), j.rank(1, 0)
	got := make(chan struct{}, 1)
	c.sinks[1].hooks(func(in *device.Inbound) bool {
		if !bytes.Equal(in.Payload, []byte("hi")) || in.Header.Source != src || in.Header.Dest != dst || in.Header.Tag != 3 ||
			in.Header.Context != 4 || in.Header.Type != 1 || in.Header.Kind != device.KindEager {
			t.Errorf("delivered %+v %q", in.Header, in.Payload)
		}
		in.Done()
		got <- struct{}{}
		return true
	}, nil)
	if err := c.trs[0].SendEager(header(src, dst, 3), []byte("hi"), nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
	case <-time.After(j.Timeout):
		t.Fatal("message not delivered")
	}
	if err := c.trs[0].Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := c.trs[0].SendEager(header(src, dst, 4), nil, nil); !errors.Is(err, device.ErrClosed) {
		t.Fatalf("SendEager after Close: %v, want ErrClosed", err)
	}
	if err := c.trs[0].Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

// testOrder: every rank sends to every rank of the other nodes at once, mixing eager, synchronous eager and
// rendezvous messages of many sizes. Each receiving sink checks, per (source, dest), that messages come in the
// order sent and carry their payload; it acknowledges synchronous messages and clears rendezvous ones from inside
// its callbacks (re-entry) or later from other goroutines, and releases inbound buffers now or later. Senders
// scribble on each header once its call returns (a device reads it during the call only). With claim, the sinks
// also claim every third eager message at its header (device.EagerClaimer): claims and deliveries keep the order
// between them, each claim completes once with its payload, and a claimed message's credit comes back though no
// Inbound is released.
func testOrder(t *testing.T, j *Job, claim bool) {
	c := startWith(t, j, claim)
	const per = 36
	sizes := []int{0, 1, 63, 64, 1000, j.EagerMax, j.EagerMax + 1, 3*j.EagerMax + 17, 100}
	bigEvery := 12 // message i%bigEvery == 5 is 1 MiB + 3 bytes
	sizeOf := func(i int) int {
		if i%bigEvery == 5 {
			return 1<<20 + 3
		}
		return sizes[i%len(sizes)]
	}
	syncOf := func(i int) bool { return i%7 == 3 }

	var e errs
	type pair struct{ src, dst int32 }
	var pending sync.WaitGroup // every completion and delivery the test expects
	later := make(chan func(), 1024)
	var laterWG sync.WaitGroup
	laterWG.Add(1)
	go func() {
		defer laterWG.Done()
		for f := range later {
			f()
		}
	}()
	for n := range j.Nodes {
		n := n
		var mu sync.Mutex
		next := map[pair]int{}
		tr := c.trs[n]
		order := func(h *device.Header) int {
			k := pair{h.Source, h.Dest}
			mu.Lock()
			i := next[k]
			next[k]++
			mu.Unlock()
			if int(h.Tag) != i {
				e.add("node %d: pair %d->%d: message %d arrived as number %d (out of order)", n, h.Source, h.Dest, h.Tag, i)
			}
			if j.nodeOf(h.Dest) != n || j.nodeOf(h.Source) == n {
				e.add("node %d: delivered %d->%d", n, h.Source, h.Dest)
			}
			return int(h.Tag)
		}
		c.sinks[n].hooks(func(in *device.Inbound) bool {
			i := order(&in.Header)
			want := payload(in.Header.Source, in.Header.Dest, i, sizeOf(i))
			if !bytes.Equal(in.Payload, want) {
				e.add("node %d: eager %d->%d #%d: payload of %d bytes differs (want %d)", n, in.Header.Source, in.Header.Dest, i, len(in.Payload), len(want))
			}
			if in.Header.Flags&device.FlagSync != 0 {
				if !syncOf(i) {
					e.add("node %d: message %d carries FlagSync", n, i)
				}
				if err := tr.Ack(&in.Header); err != nil {
					e.add("node %d: Ack: %v", n, err)
				}
			}
			if i%2 == 0 {
				in.Done()
			} else {
				later <- in.Done
			}
			pending.Done()
			return true
		}, nil)
		if claim {
			c.sinks[n].mu.Lock()
			c.sinks[n].onClaim = func(h *device.Header) (device.Payload, device.Completer, bool) {
				if h.Tag%3 != 1 {
					return device.Payload{}, nil, false
				}
				i := order(h)
				src, dst := h.Source, h.Dest
				if h.Kind != device.KindEager || h.Length != uint64(sizeOf(i)) {
					e.add("node %d: claim %+v for message %d of %d bytes", n, *h, i, sizeOf(i))
				}
				if h.Flags&device.FlagSync != 0 {
					if !syncOf(i) {
						e.add("node %d: message %d carries FlagSync", n, i)
					}
					if err := tr.Ack(h); err != nil {
						e.add("node %d: Ack: %v", n, err)
					}
				}
				// Every other claim takes the payload into pieces, tiny, large or mixed (a receive into a View's
				// blocks), which the device scatters into.
				buf := make([]byte, h.Length)
				dstp := device.Contiguous(buf)
				var blk *blocks
				if i%2 == 1 {
					blk = newBlocks(rand.New(rand.NewSource(int64(i))), int(h.Length), [...]string{"tiny", "large", "mixed"}[i%3])
					dstp = device.Payload{Segs: blk, Len: int(h.Length)}
				}
				want := payload(src, dst, i, sizeOf(i))
				return dstp, completer(func(err error) {
					if blk != nil {
						blk.gather(0, buf)
						if !blk.gapsClean() {
							e.add("node %d: claimed %d->%d #%d: bytes written between the pieces", n, src, dst, i)
						}
					}
					if err != nil {
						e.add("node %d: claimed %d->%d #%d: %v", n, src, dst, i, err)
					} else if !bytes.Equal(buf, want) {
						e.add("node %d: claimed %d->%d #%d: payload differs", n, src, dst, i)
					}
					pending.Done()
				}), true
			}
			c.sinks[n].mu.Unlock()
		}
		c.sinks[n].hooks(nil, func(rts *device.Header) bool {
			i := order(rts)
			if rts.Kind != device.KindRTS || rts.Length != uint64(sizeOf(i)) {
				e.add("node %d: RTS %+v for message %d of %d bytes", n, *rts, i, sizeOf(i))
				pending.Done()
				return true
			}
			dst := make([]byte, rts.Length)
			want := payload(rts.Source, rts.Dest, i, sizeOf(i))
			done := completer(func(err error) {
				if err != nil {
					e.add("node %d: rendezvous %d->%d #%d: %v", n, rts.Source, rts.Dest, i, err)
				} else if !bytes.Equal(dst, want) {
					e.add("node %d: rendezvous %d->%d #%d: payload differs", n, rts.Source, rts.Dest, i)
				}
				pending.Done()
			})
			clear := func() {
				if err := tr.ClearToSend(rts, dst, done); err != nil {
					e.add("node %d: ClearToSend: %v", n, err)
					pending.Done()
				}
			}
			if i%3 == 0 {
				later <- clear
			} else {
				clear()
			}
			return true
		})
	}

	var senders sync.WaitGroup
	for n := range j.Nodes {
		for l := range j.RanksPerNode {
			src := j.rank(n, l)
			senders.Add(1)
			go func() {
				defer senders.Done()
				for i := range per {
					for d := range j.ranks() {
						dst := int32(d)
						if j.nodeOf(dst) == n {
							continue
						}
						size := sizeOf(i)
						p := payload(src, dst, i, size)
						h := header(src, dst, i)
						lim := c.trs[n].EagerLimit(int(dst))
						eager := lim > 0 && size <= lim
						var done device.Completer
						pending.Add(1) // the delivery
						if syncOf(i) || !eager {
							pending.Add(1)
							done = completer(func(err error) {
								if err != nil {
									e.add("send %d->%d #%d: %v", src, dst, i, err)
								}
								pending.Done()
							})
						}
						var err error
						switch {
						case eager && syncOf(i):
							h.Flags |= device.FlagSync
							err = c.trs[n].SendEager(h, p, done)
						case eager:
							err = c.trs[n].SendEager(h, p, nil)
						default:
							h.Kind = device.KindRTS
							h.Length = uint64(size)
							if syncOf(i) {
								h.Flags |= device.FlagSync
							}
							err = c.trs[n].SendRendezvous(h, p, done)
						}
						if err != nil {
							e.add("send %d->%d #%d: %v", src, dst, i, err)
							return
						}
						*h = device.Header{Kind: device.KindData, Source: -1, Dest: -1, Tag: -1, Length: 1 << 40}
						if eager {
							clear(p) // SendEager's payload is free once it returns
						}
					}
				}
			}()
		}
	}
	senders.Wait()
	all := make(chan struct{})
	go func() { pending.Wait(); close(all) }()
	select {
	case <-all:
	case <-time.After(3 * j.Timeout):
		e.check(t)
		t.Fatal("not every message was delivered and completed")
	}
	close(later)
	laterWG.Wait()
	e.check(t)
	for n, s := range c.sinks {
		s.mu.Lock()
		if len(s.lost) != 0 {
			t.Errorf("node %d: unexpected PeerLost: %v", n, s.lost)
		}
		s.mu.Unlock()
	}
}

func testErrors(t *testing.T, j *Job) {
	c := start(t, j)
	tr := c.trs[0]
	src := j.rank(0, 0)
	local := src
	if j.RanksPerNode > 1 {
		local = j.rank(0, 1)
	}
	remote := j.rank(1, 0)
	never := completer(func(error) { t.Error("a failed call completed its Completer") })
	if err := tr.SendEager(header(src, local, 0), nil, nil); err == nil {
		t.Error("SendEager to a rank of this node: no error")
	}
	if err := tr.SendEager(header(src, int32(j.ranks()), 0), nil, nil); err == nil {
		t.Error("SendEager to a rank outside the job: no error")
	}
	if err := tr.SendEager(header(remote, src, 0), nil, nil); err == nil {
		t.Error("SendEager from a rank of another node: no error")
	}
	if err := tr.SendEager(nil, nil, nil); err == nil {
		t.Error("SendEager(nil): no error")
	}
	if err := tr.SendEager(header(src, remote, 0), make([]byte, j.EagerMax+1), never); err == nil {
		t.Error("SendEager over the eager limit: no error")
	}
	h := header(src, local, 0)
	h.Kind = device.KindRTS
	if err := tr.SendRendezvous(h, make([]byte, 10), never); err == nil {
		t.Error("SendRendezvous to a rank of this node: no error")
	}
	rts := &device.Header{Kind: device.KindRTS, Source: remote, Dest: src, Length: 10, Seq: 1}
	if err := tr.ClearToSend(rts, make([]byte, 11), never); err == nil {
		t.Error("ClearToSend with a buffer longer than the message: no error")
	}
	if err := tr.Ack(&device.Header{Kind: device.KindRTS, Source: remote, Dest: src}); err == nil {
		t.Error("Ack of a message that is not a synchronous eager one: no error")
	}
	if lim := tr.EagerLimit(j.ranks() + 5); lim != 0 {
		t.Errorf("EagerLimit of a rank outside the job: %d", lim)
	}
	if lim := tr.EagerLimit(int(remote)); lim != j.EagerMax {
		t.Errorf("EagerLimit with full credit: %d, want %d", lim, j.EagerMax)
	}
}

// testFlow: a receiver that holds every inbound buffer makes the sender's EagerLimit drop before it holds more than
// HeldBound bytes; rendezvous still gets through; releasing the buffers returns the credit.
func testFlow(t *testing.T, j *Job) {
	if j.HeldBound == 0 || j.EagerMax == 0 {
		t.Skip("no flow-control bound given")
	}
	c := start(t, j)
	src, dst := j.rank(0, 0), j.rank(1, 0)
	tr, s := c.trs[0], c.sinks[1]
	var held int64
	s.hooks(func(in *device.Inbound) bool { held += int64(len(in.Payload)); return false }, nil) // kept in s.eager
	sent := 0
	for tr.EagerLimit(int(dst)) >= j.EagerMax {
		if int64(sent)*int64(j.EagerMax) > j.HeldBound {
			t.Fatalf("sent %d eager messages of %d bytes (over the bound %d) and EagerLimit is still %d", sent, j.EagerMax, j.HeldBound, tr.EagerLimit(int(dst)))
		}
		if err := tr.SendEager(header(src, dst, sent), payload(src, dst, sent, j.EagerMax), nil); err != nil {
			t.Fatal(err)
		}
		sent++
	}
	s.wait(t, j.Timeout, "the held messages", func() bool { return len(s.eager) == sent })
	if held > j.HeldBound {
		t.Fatalf("the receiver holds %d bytes, over the bound %d", held, j.HeldBound)
	}
	// Rendezvous needs no eager credit: it gets through while every buffer is held.
	s.hooks(nil, func(rts *device.Header) bool {
		buf := make([]byte, rts.Length)
		if err := c.trs[1].ClearToSend(rts, buf, nil); err != nil {
			t.Error(err)
		}
		return true
	})
	ok := make(chan error, 1)
	h := header(src, dst, sent)
	h.Kind, h.Length = device.KindRTS, 0
	if err := tr.SendRendezvous(h, nil, completer(func(err error) { ok <- err })); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ok:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(j.Timeout):
		t.Fatal("an empty rendezvous did not complete while the receiver held every eager buffer")
	}
	s.mu.Lock()
	for i, in := range s.eager {
		if in.Header.Tag != int32(i) {
			t.Errorf("held message %d has tag %d", i, in.Header.Tag)
		}
		in.Done()
	}
	s.eager = nil
	s.mu.Unlock()
	waitFor(t, j.Timeout, "the credit to come back", func() bool { return tr.EagerLimit(int(dst)) == j.EagerMax })
}

// testClaimCredit: eager messages the receiving sink claims at their header (device.EagerClaimer) release no
// Inbound, yet their credit comes back: a stream of four times the flow-control bound gets through, each message
// waiting for credit, and every claim completes with its payload.
func testClaimCredit(t *testing.T, j *Job) {
	if j.HeldBound == 0 || j.EagerMax == 0 {
		t.Skip("no flow-control bound given")
	}
	c := startWith(t, j, true)
	src, dst := j.rank(0, 0), j.rank(1, 0)
	tr, s := c.trs[0], c.sinks[1]
	var e errs
	var claimed sync.WaitGroup
	s.mu.Lock()
	s.onClaim = func(h *device.Header) (device.Payload, device.Completer, bool) {
		i := int(h.Tag)
		buf := make([]byte, h.Length)
		return device.Contiguous(buf), completer(func(err error) {
			if err != nil || !bytes.Equal(buf, payload(src, dst, i, j.EagerMax)) {
				e.add("claimed message %d: %v, or its payload differs", i, err)
			}
			claimed.Done()
		}), true
	}
	s.mu.Unlock()
	n := int(4*j.HeldBound/int64(j.EagerMax)) + 1
	for i := range n {
		waitFor(t, j.Timeout, fmt.Sprintf("credit for message %d of %d (claimed messages give theirs back)", i, n),
			func() bool { return tr.EagerLimit(int(dst)) >= j.EagerMax })
		claimed.Add(1)
		if err := tr.SendEager(header(src, dst, i), payload(src, dst, i, j.EagerMax), nil); err != nil {
			t.Fatal(err)
		}
	}
	all := make(chan struct{})
	go func() { claimed.Wait(); close(all) }()
	select {
	case <-all:
	case <-time.After(j.Timeout):
		t.Fatal("not every claimed message completed")
	}
	e.check(t)
	if len(s.eager) != 0 {
		t.Fatalf("%d messages were delivered, not claimed", len(s.eager))
	}
}

// waitFor polls cond (state with no event to wait on, such as returned credit) until it holds.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// testPoller: a goroutine driving the receiving device gets its traffic through Poll, with the sink calling back
// into the device from inside Poll; once it parks, the device progresses on its own.
func testPoller(t *testing.T, j *Job) {
	c := start(t, j)
	p, ok := c.trs[1].(device.Poller)
	if !ok {
		t.Skip("the device is not a Poller")
	}
	src, dst := j.rank(0, 0), j.rank(1, 0)
	s := c.sinks[1]
	var got atomic.Int64 // messages delivered, eager or (an eager send that found no credit) rendezvous
	s.hooks(func(in *device.Inbound) bool {
		in.Done()
		got.Add(1)
		return true
	}, func(rts *device.Header) bool {
		buf := make([]byte, rts.Length)
		if err := c.trs[1].ClearToSend(rts, buf, nil); err != nil { // from inside Poll
			t.Error(err)
		}
		if rts.Length < 1<<10 {
			got.Add(1)
		}
		return true
	})
	p.Enter()
	const n = 50
	for i := range n {
		if err := c.trs[0].SendEager(header(src, dst, i), payload(src, dst, i, 24), nil); err != nil {
			t.Fatal(err)
		}
	}
	big := payload(src, dst, 0, 600<<10)
	sent := make(chan error, 1)
	h := header(src, dst, n)
	h.Kind, h.Length = device.KindRTS, uint64(len(big))
	if err := c.trs[0].SendRendezvous(h, big, completer(func(err error) { sent <- err })); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(j.Timeout)
	for {
		p.Poll()
		select {
		case err := <-sent:
			if err != nil {
				t.Fatal(err)
			}
		default:
			if time.Now().After(deadline) {
				t.Fatal("a rendezvous did not complete while the receiver was driven")
			}
			continue
		}
		break
	}
	for got.Load() < n {
		p.Poll()
		if time.Now().After(deadline) {
			t.Fatalf("driven device delivered %d of %d messages", got.Load(), n)
		}
	}
	p.Leave(true)
	for i := range 10 {
		if err := c.trs[0].SendEager(header(src, dst, n+1+i), nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	s.wait(t, j.Timeout, "delivery after the driver parked", func() bool { return got.Load() == n+10 })
}

func testRegistrar(t *testing.T, j *Job) {
	c := start(t, j)
	r0, ok0 := c.trs[0].(device.Registrar)
	r1, ok1 := c.trs[1].(device.Registrar)
	if !ok0 || !ok1 {
		t.Skip("the device is not a Registrar")
	}
	src, dst := j.rank(0, 0), j.rank(1, 0)
	big := payload(src, dst, 1, 300<<10)
	into := make([]byte, len(big))
	g0, err := r0.Register(big)
	if err != nil {
		t.Fatal(err)
	}
	g1, err := r1.Register(into)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		clear(into)
		recv := make(chan error, 1)
		c.sinks[1].hooks(nil, func(rts *device.Header) bool {
			if err := c.trs[1].ClearToSend(rts, into, completer(func(err error) { recv <- err })); err != nil {
				recv <- err
			}
			return true
		})
		h := header(src, dst, round)
		h.Kind, h.Length = device.KindRTS, uint64(len(big))
		if err := c.trs[0].SendRendezvous(h, big, nil); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-recv:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(j.Timeout):
			t.Fatal("rendezvous between registered buffers did not complete")
		}
		if !bytes.Equal(into, big) {
			t.Fatalf("round %d: payload differs", round)
		}
	}
	g0.Release()
	g1.Release()
}

// testClose: what was handed to a device before Close is delivered (eager messages, and rendezvous ones, which
// Close waits for), in order, and Close returns.
func testClose(t *testing.T, j *Job) {
	c := start(t, j)
	src, dst := j.rank(0, 0), j.rank(1, 0)
	const n = 200
	var tmu sync.Mutex
	var tags []int32
	var e errs
	var moved sync.WaitGroup
	record := func(tag int32) {
		tmu.Lock()
		tags = append(tags, tag)
		tmu.Unlock()
	}
	sizeOf := func(i int) int {
		if i == n {
			return 256 << 10
		}
		return min(j.EagerMax, 512)
	}
	c.sinks[1].hooks(func(in *device.Inbound) bool {
		record(in.Header.Tag)
		if i := int(in.Header.Tag); !bytes.Equal(in.Payload, payload(src, dst, i, sizeOf(i))) {
			e.add("eager message %d: payload differs", i)
		}
		in.Done()
		return true
	}, func(rts *device.Header) bool {
		record(rts.Tag)
		buf := make([]byte, rts.Length)
		i := int(rts.Tag)
		err := c.trs[1].ClearToSend(rts, buf, completer(func(err error) {
			if err != nil || !bytes.Equal(buf, payload(src, dst, i, sizeOf(i))) {
				e.add("rendezvous message %d: %v, or payload differs", i, err)
			}
			moved.Done()
		}))
		if err != nil {
			e.add("ClearToSend: %v", err)
			moved.Done()
		}
		return true
	})
	for i := range n + 1 {
		size := sizeOf(i)
		h := header(src, dst, i)
		var err error
		if lim := c.trs[0].EagerLimit(int(dst)); lim > 0 && size <= lim {
			err = c.trs[0].SendEager(h, payload(src, dst, i, size), nil)
		} else {
			moved.Add(1)
			h.Kind, h.Length = device.KindRTS, uint64(size)
			err = c.trs[0].SendRendezvous(h, payload(src, dst, i, size), nil)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := c.trs[0].Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	s := c.sinks[1]
	s.wait(t, j.Timeout, "every message sent before Close", func() bool {
		tmu.Lock()
		defer tmu.Unlock()
		return len(tags) == n+1
	})
	moved.Wait() // Close returned: every rendezvous had completed on the sender, hence on the receiver too
	e.check(t)
	for i, tag := range tags {
		if tag != int32(i) {
			t.Fatalf("message %d has tag %d", i, tag)
		}
	}
}

// testPeerLost: a node that vanishes is reported once, and what was pending with it completes with an error.
func testPeerLost(t *testing.T, j *Job) {
	if j.Kill == nil {
		t.Skip("no way to kill a node")
	}
	c := start(t, j)
	src, dst := j.rank(0, 0), j.rank(1, 0)
	failed := make(chan error, 1)
	h := header(src, dst, 0)
	big := payload(src, dst, 0, 64<<10)
	h.Kind, h.Length = device.KindRTS, uint64(len(big))
	if err := c.trs[0].SendRendezvous(h, big, completer(func(err error) { failed <- err })); err != nil {
		t.Fatal(err)
	}
	s1 := c.sinks[1]
	s1.wait(t, j.Timeout, "the RTS", func() bool { return len(s1.rts) == 1 })
	j.Kill(t, 1, c.trs[1])
	s := c.sinks[0]
	s.wait(t, j.Timeout, "PeerLost", func() bool { return len(s.lost[1]) > 0 })
	select {
	case err := <-failed:
		if err == nil {
			t.Fatal("a rendezvous to a lost node completed without error")
		}
	case <-time.After(j.Timeout):
		t.Fatal("a rendezvous to a lost node never completed")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.lost[1]); n != 1 {
		t.Fatalf("PeerLost(1) reported %d times: %v", n, s.lost[1])
	}
	for k := range s.lost {
		if k != 1 {
			t.Fatalf("PeerLost(%d) reported, only node 1 died", k)
		}
	}
}

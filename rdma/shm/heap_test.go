//go:build linux

package shm

import (
	"bytes"
	"errors"
	"maps"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/rdma"
)

// lendPair opens two connected endpoints in this process, without CMA (opts.NoCMA), so that whatever moves between
// them moves through the lent-memory windows.
func lendPair(t testing.TB, noCMA bool) [2]*endpoint {
	t.Helper()
	var eps [2]*endpoint
	for i := range 2 {
		ep, err := Provider{Opts: Options{NoCMA: noCMA}}.Open(rdma.EndpointConfig{Node: i, Nodes: 2, Secret: testSecret})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ep.Close() })
		eps[i] = ep.(*endpoint)
	}
	for i := range 2 {
		if err := eps[i].Connect(1-i, eps[1-i].Address()); err != nil {
			t.Fatal(err)
		}
	}
	if err := eps[0].Ready(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := eps[1].Ready(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	return eps
}

// rmaDone polls ep until the completion of ctx comes, and returns its error.
func rmaDone(t *testing.T, ep *endpoint, ctx uint64) error {
	t.Helper()
	cs := make([]rdma.Completion, 8)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		n, err := ep.Poll(cs)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs[:n] {
			if c.Ctx == ctx {
				return c.Err
			}
		}
		runtime.Gosched()
	}
	t.Fatalf("no completion of %d within 30 s", ctx)
	return nil
}

func pattern(b []byte, seed byte) {
	for i := range b {
		b[i] = byte(i*7) + seed
	}
}

// TestLentReadWrite: memory one endpoint lent is read and written by the other through its mapping of the
// segment, without CMA; a sub-range named by its address (a split copy's second half) lands where it should;
// repeated transfers of one buffer map no new window.
func TestLentReadWrite(t *testing.T) {
	eps := lendPair(t, true)
	buf, err := eps[0].Alloc(3<<20 + 123)
	if err != nil {
		t.Fatal(err)
	}
	pattern(buf, 1)
	mr, err := eps[0].Register(buf, rdma.AccessRemoteRead|rdma.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	if mr.Key()&keyLent == 0 {
		t.Fatalf("the key of lent memory is %#x, without keyLent", mr.Key())
	}
	for i, off := range []int{0, 1, 1 << 20, 3<<20 + 100, 0} {
		local := make([]byte, min(len(buf)-off, 1<<20+7))
		raddr := mr.Addr(unsafe.Pointer(&buf[off]))
		if err := eps[1].Read(0, local, nil, raddr, mr.Key(), uint64(10+i)); err != nil {
			t.Fatal(err)
		}
		if err := rmaDone(t, eps[1], uint64(10+i)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(local, buf[off:off+len(local)]) {
			t.Fatalf("read at %d: the bytes differ", off)
		}
	}
	src := make([]byte, 5000)
	pattern(src, 9)
	raddr := mr.Addr(unsafe.Pointer(&buf[2<<20+3]))
	if err := eps[1].Write(0, src, nil, raddr, mr.Key(), 99); err != nil {
		t.Fatal(err)
	}
	if err := rmaDone(t, eps[1], 99); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf[2<<20+3:2<<20+3+len(src)], src) {
		t.Fatal("the write did not land in the lent memory")
	}
	p := eps[1].peer(0)
	p.winMu.Lock()
	wins := len(p.wins)
	p.winMu.Unlock()
	if wins != 1 {
		t.Fatalf("%d mappings of the peer's segment for one 3 MiB buffer, want 1", wins)
	}
}

// TestLentBadRange: a key and address that name memory outside the peer's segment, or its control page, fail the
// operation with an error naming the peer (CMA, the fallback, is off), and touch nothing.
func TestLentBadRange(t *testing.T) {
	eps := lendPair(t, true)
	buf, err := eps[0].Alloc(8192)
	if err != nil {
		t.Fatal(err)
	}
	mr, _ := eps[0].Register(buf, rdma.AccessRemoteRead)
	base := mr.Addr(unsafe.Pointer(&buf[0]))
	local := make([]byte, 4096)
	for i, c := range []struct {
		name  string
		raddr uint64
		key   uint64
	}{
		{"past the segment", base + 1<<30, mr.Key()},
		{"the control page", base, keyOf(-int64(base))},
		{"before the segment", base, keyOf(-int64(base) - 1<<20)},
		{"a huge offset", base, keyOf(1 << 61)},
	} {
		err := eps[1].Read(0, local, nil, c.raddr, c.key, uint64(i))
		var oe *rdma.OpError
		if !errors.As(err, &oe) || oe.Node != 0 {
			t.Fatalf("%s: Read returned %v, want an OpError naming node 0", c.name, err)
		}
	}
}

// TestLentFree: Free gives the memory back: the program's slice reads zeros and no longer reaches the segment; a
// later Alloc reuses the segment's pages, zeroed, and the peer reads the new contents at the new address.
func TestLentFree(t *testing.T) {
	eps := lendPair(t, true)
	a, err := eps[0].Alloc(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	pattern(a, 3)
	if off, ok := eps[0].offsetOf(a[100:200]); !ok || off < pageSize {
		t.Fatalf("a sub-slice of lent memory is not found in the heap (%d, %v)", off, ok)
	}
	if _, ok := eps[0].offsetOf(make([]byte, 10)); ok {
		t.Fatal("Go memory is taken for lent memory")
	}
	size := eps[0].seg.size
	if ok, err := eps[0].Free(a); !ok || err != nil {
		t.Fatalf("Free: %v, %v", ok, err)
	}
	if ok, _ := eps[0].Free(a); ok {
		t.Fatal("a second Free of the same memory reports it freed")
	}
	if ok, _ := eps[0].Free(make([]byte, 10)); ok {
		t.Fatal("Free of Go memory reports it freed")
	}
	for i, x := range a {
		if x != 0 {
			t.Fatalf("freed memory still reads %d at %d", x, i)
		}
	}
	a[0] = 1 // writes to nobody
	b, err := eps[0].Alloc(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if eps[0].seg.size != size {
		t.Fatalf("the segment grew from %d to %d although a freed part fitted", size, eps[0].seg.size)
	}
	for i, x := range b {
		if x != 0 {
			t.Fatalf("reused memory reads %d at %d", x, i)
		}
	}
	pattern(b, 5)
	mr, _ := eps[0].Register(b, rdma.AccessRemoteRead)
	local := make([]byte, len(b))
	if err := eps[1].Read(0, local, nil, mr.Addr(unsafe.Pointer(&b[0])), mr.Key(), 1); err != nil {
		t.Fatal(err)
	}
	if err := rmaDone(t, eps[1], 1); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(local, b) {
		t.Fatal("the peer read other bytes than the reused memory holds")
	}
	if a[0] != 1 || b[0] == 1 {
		t.Fatal("the freed slice and the new one share memory")
	}
	if z, err := eps[0].Alloc(0); err != nil || len(z) != 0 {
		t.Fatalf("Alloc(0): %d bytes, %v", len(z), err)
	}
	if _, err := eps[0].Alloc(-1); err == nil {
		t.Fatal("Alloc(-1) succeeded")
	}
}

// TestKeyDelta: keyOf and deltaOf are inverse for the distances an address and an offset can have.
func TestKeyDelta(t *testing.T) {
	for _, d := range []int64{0, 1, -1, 4096, -0x7fff_ffff_f000, 1 << 40, -(1 << 56), 1<<62 - 1, -(1 << 62)} {
		if k := keyOf(d); k&keyLent == 0 || deltaOf(k) != d {
			t.Fatalf("delta %d: key %#x gives back %d", d, k, deltaOf(k))
		}
	}
}

// FuzzLentRange feeds a peer's window mapping arbitrary offsets and lengths, as a forged or corrupt key and
// address would give it: it maps only what lies inside the peer's segment past its control page, returns exactly
// the bytes asked for (the lent memory's own where the range falls in it), and never panics.
func FuzzLentRange(f *testing.F) {
	eps := lendPair(f, true)
	buf, err := eps[0].Alloc(64 << 10)
	if err != nil {
		f.Fatal(err)
	}
	pattern(buf, 7)
	base, _ := eps[0].offsetOf(buf)
	p := eps[1].peer(0)
	for _, seed := range []struct {
		off int64
		n   int
	}{{base, 100}, {base + 60<<10, 8 << 10}, {0, 10}, {pageSize - 1, 2}, {1 << 40, 1}, {-5, 10}, {base, -1}, {base, 0}} {
		f.Add(seed.off, seed.n)
	}
	f.Fuzz(func(t *testing.T, off int64, n int) {
		w, err := p.lentRange(off, n)
		if err != nil {
			return
		}
		if len(w) != n || off < pageSize || off+int64(n) > eps[0].seg.size {
			t.Fatalf("lentRange(%d, %d) gave %d bytes of a segment of %d", off, n, len(w), eps[0].seg.size)
		}
		if off >= base && off+int64(n) <= base+int64(len(buf)) && !bytes.Equal(w, buf[off-base:off-base+int64(n)]) {
			t.Fatalf("lentRange(%d, %d) inside the lent buffer: other bytes", off, n)
		}
	})
}

// TestLentRendezvousWithoutCMA: between devices whose provider has no CMA (as in a container that refuses it), a
// rendezvous of lent memory still goes by Read and Write through the mapping of the peer's segment: into a lent
// receive buffer (split between both ends, each writing or reading through its mapping), and into Go memory (read
// whole by the receiver). The payload arrives intact, and the mappings of the segments show the way it took. A
// payload of Go memory is streamed through the rings, as before.
func TestLentRendezvousWithoutCMA(t *testing.T) {
	const size = 1<<20 + 40 // past the split limit
	devs, eps := devicePair(t, Options{NoCMA: true})
	lentDst, err := eps[1].Alloc(size)
	if err != nil {
		t.Fatal(err)
	}
	sinks := connectPing(t, devs, 0)
	src, err := eps[0].Alloc(size)
	if err != nil {
		t.Fatal(err)
	}
	goDst := make([]byte, size)
	goSrc := make([]byte, size)
	maps := func(e *endpoint, node int) bool { // e has mapped node's segment
		p := e.peer(node)
		p.winMu.Lock()
		defer p.winMu.Unlock()
		return len(p.wins) > 0
	}
	for k, c := range []struct {
		name     string
		from, to []byte
		way      func() bool // how the payload went, seen afterwards
	}{
		// Split: the receiver Reads its half from the sender's segment, and the second half goes by whichever end
		// takes the claim word, Written into the receiver's segment or Read from the sender's: a mapping either way.
		{"lent into lent", src, lentDst, func() bool { return maps(eps[1], 0) || maps(eps[0], 1) }},
		// The receiver Reads all: it maps the sender's segment.
		{"lent into Go memory", src, goDst, func() bool { return maps(eps[1], 0) }},
		{"Go memory into Go memory", goSrc, goDst, func() bool { return true }},
	} {
		pattern(c.from, byte(k+1))
		clear(c.to)
		sinks[1].buf.Store(&c.to)
		var sent doneFlag
		want := sinks[1].got.Load() + 1 // before the send: the devices' own goroutines may complete it at once
		h := &device.Header{Kind: device.KindRTS, Type: 1, Source: 0, Dest: 1, Length: size}
		if err := devs[0].SendRendezvous(h, c.from, &sent); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for sinks[1].got.Load() < want || sent.n.Load() < 1 {
			devs[0].Poll()
			devs[1].Poll()
			if time.Now().After(deadline) {
				t.Fatalf("%s: the rendezvous did not complete within 30 s (received %d of %d, sent %d)", c.name, sinks[1].got.Load(), want, sent.n.Load())
			}
		}
		if !bytes.Equal(c.to, c.from) {
			t.Fatalf("%s: the bytes differ", c.name)
		}
		if !c.way() {
			t.Fatalf("%s: the payload did not go through the mappings of the lent memory", c.name)
		}
	}
}

// devicePair opens two endpoints of this process with opts and an rdma device over each (2 nodes of one rank),
// closed when the test ends; the caller connects them to its sinks (devicetest.Connect).
func devicePair(t testing.TB, opts Options) ([2]*rdma.Device, [2]*endpoint) {
	t.Helper()
	var devs [2]*rdma.Device
	var eps [2]*endpoint
	for i := range 2 {
		ep, err := Provider{Opts: opts}.Open(rdma.EndpointConfig{Node: i, Nodes: 2, Secret: testSecret})
		if err != nil {
			t.Fatal(err)
		}
		d, err := rdma.New(ep, rdma.Config{Node: i, Nodes: 2, Ranks: 2, NodeOf: func(r int) int { return r }})
		if err != nil {
			t.Fatal(err)
		}
		devs[i], eps[i] = d, ep.(*endpoint)
		t.Cleanup(func() { d.Close() })
	}
	return devs, eps
}

// TestAddSpan: the populated ranges of a peer's mapping (peer.mapped) against a map of pages: after any sequence
// of ranges, the spans are sorted, disjoint and not adjacent, cover exactly the pages asked for, and every page was
// filled once, the first time.
func TestAddSpan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		var spans []span
		filled := map[int64]int{}
		asked := map[int64]bool{}
		for k := 0; k < 1+rng.IntN(30); k++ {
			lo := int64(rng.IntN(64))
			hi := lo + int64(rng.IntN(16))
			spans = addSpan(spans, lo, hi, func(a, b int64) {
				if a >= b {
					t.Fatalf("fill of an empty range [%d, %d)", a, b)
				}
				for x := a; x < b; x++ {
					filled[x]++
				}
			})
			for x := lo; x < hi; x++ {
				asked[x] = true
			}
			covered := map[int64]bool{}
			for i, s := range spans {
				if s.n <= 0 || (i > 0 && spans[i-1].off+spans[i-1].n >= s.off) {
					t.Fatalf("trial %d: spans not sorted, disjoint and apart: %v", trial, spans)
				}
				for x := s.off; x < s.off+s.n; x++ {
					covered[x] = true
				}
			}
			if !maps.Equal(covered, asked) {
				t.Fatalf("trial %d: spans %v cover %v, asked %v", trial, spans, covered, asked)
			}
			for x, n := range filled {
				if n != 1 || !asked[x] {
					t.Fatalf("trial %d: unit %d filled %d times (asked %v)", trial, x, n, asked[x])
				}
			}
			if len(filled) != len(asked) {
				t.Fatalf("trial %d: %d units filled, %d asked", trial, len(filled), len(asked))
			}
		}
	}
}

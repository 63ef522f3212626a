//go:build linux

package shm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/gompj/gompj/rdma"
)

// ringMem returns heap memory for a ring of n cells, aligned to a cache line as a mapping is.
func ringMem(cells int) []byte {
	b := make([]byte, ringBytes(cells)+cellSize)
	off := (cellSize - int(uintptr(unsafe.Pointer(&b[0]))%cellSize)) % cellSize
	return b[off : off+ringBytes(cells) : off+ringBytes(cells)]
}

func pair(t testing.TB, cells int) (*producer, *consumer) {
	m := ringMem(cells)
	p, err := newProducer(m)
	if err != nil {
		t.Fatal(err)
	}
	c, err := newConsumer(m, maxMsg(uint64(cells)))
	if err != nil {
		t.Fatal(err)
	}
	return p, c
}

func msgOf(i, n int) []byte {
	b := make([]byte, n)
	for k := range b {
		b[k] = byte(i*7 + k*13)
	}
	return b
}

// TestRingRoundTrip: messages of every size up to the largest go through, wrapping around the ring many times,
// split between a header and a payload part; a full ring refuses (errAgain) until the consumer frees cells.
func TestRingRoundTrip(t *testing.T) {
	const cells = 64
	p, c := pair(t, cells)
	max := maxMsg(cells)
	dst := make([]byte, max)
	sizes := []int{0, 1, 47, 48, 49, 111, 112, 113, 500, max - 1, max}
	for i := range 2000 {
		n := sizes[i%len(sizes)]
		m := msgOf(i, n)
		split := min(n, 48)
		if err := p.push(m[:split], m[split:]); err != nil {
			t.Fatalf("message %d (%d bytes): %v", i, n, err)
		}
		got, ok, err := c.peek()
		if err != nil || !ok || got != n {
			t.Fatalf("message %d: peek %d %v %v", i, got, ok, err)
		}
		c.consume(dst, got)
		if !bytes.Equal(dst[:n], m) {
			t.Fatalf("message %d of %d bytes differs", i, n)
		}
		if _, ok, _ := c.peek(); ok || c.ready() {
			t.Fatal("an empty ring has an entry")
		}
	}
	if err := p.push(make([]byte, max+1), nil); err == nil {
		t.Fatal("a message over the largest was accepted")
	}
	// Fill: 64 cells take 4 entries of 16 cells (a message of 16*64-16 bytes).
	n := 16*cellSize - entryHdr
	for i := range 4 {
		if err := p.push(msgOf(i, n), nil); err != nil {
			t.Fatalf("filling: %v", err)
		}
	}
	if err := p.push(nil, nil); err != errAgain {
		t.Fatalf("a full ring: %v, want errAgain", err)
	}
	got, _, _ := c.peek()
	c.consume(dst, got)
	for i := range 16 { // the 16 cells freed take 16 empty messages
		if err := p.push(nil, nil); err != nil {
			t.Fatalf("after one was consumed, message %d: %v", i, err)
		}
	}
	if err := p.push(nil, nil); err != errAgain {
		t.Fatalf("full again: %v", err)
	}
}

// TestRingConcurrentProducers: producers on several goroutines reserve without a lock; the consumer sees each
// producer's messages in its order, whole.
func TestRingConcurrentProducers(t *testing.T) {
	const producers, per = 4, 3000
	p, c := pair(t, 256)
	var wg sync.WaitGroup
	for g := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; {
				n := (i*31 + g) % 300
				m := msgOf(g*per+i, n)
				var h [8]byte
				binary.LittleEndian.PutUint32(h[:], uint32(g))
				binary.LittleEndian.PutUint32(h[4:], uint32(i))
				switch err := p.push(h[:], m); err {
				case nil:
					i++
				case errAgain:
				default:
					t.Error(err)
					return
				}
			}
		}()
	}
	next := make([]int, producers)
	dst := make([]byte, maxMsg(256))
	for done := 0; done < producers*per; {
		n, ok, err := c.peek()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			if t.Failed() {
				t.FailNow()
			}
			continue
		}
		c.consume(dst, n)
		g, i := int(binary.LittleEndian.Uint32(dst)), int(binary.LittleEndian.Uint32(dst[4:]))
		if g >= producers || i != next[g] {
			t.Fatalf("producer %d message %d, expected %d", g, i, next[g])
		}
		want := msgOf(g*per+i, (i*31+g)%300)
		if !bytes.Equal(dst[8:n], want) {
			t.Fatalf("producer %d message %d differs", g, i)
		}
		next[g]++
		done++
	}
	wg.Wait()
}

// TestRingCorrupt: what no correct peer writes is an error wrapping ErrCorrupt, at either end.
func TestRingCorrupt(t *testing.T) {
	p, c := pair(t, 64)
	p.push([]byte("hello"), nil)
	first := ringHdr
	*u64(c.mem, uint64(first)) = 7 // a sequence number that is not head+1
	if _, _, err := c.peek(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bad sequence: %v", err)
	}
	*u64(c.mem, uint64(first)) = 1
	*u32(c.mem, first+8) = 1 << 30 // a length over the limit
	if _, _, err := c.peek(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bad length: %v", err)
	}
	*u32(c.mem, first+8) = 5
	*u32(c.mem, first+12) = 3 // cells that do not match the length
	if _, _, err := c.peek(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bad cell count: %v", err)
	}
	*u64(p.mem, 0) = 1 << 40 // a head past the producer's tail
	for range 64 {
		if err := p.push(make([]byte, 1000), nil); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("bad head: %v", err)
			}
			return
		}
	}
	t.Fatal("a bad head went unnoticed")
}

// FuzzRingConsumer: whatever a peer writes into the ring (cells and head), the consumer never panics, never copies
// more than the entry it validated, never shows (view) bytes outside the ring's cells, and reports garbage as
// ErrCorrupt. The bits of inPlace choose, entry by entry, the in-place path (view, release) or the copy (consume).
func FuzzRingConsumer(f *testing.F) {
	p, _ := pair(f, 64)
	p.push([]byte("header-bytes"), []byte("payload"))
	p.push(nil, msgOf(1, 200))
	f.Add(append([]byte(nil), p.mem[ringHdr:]...), uint16(0), uint8(0))
	f.Add(append([]byte(nil), p.mem[ringHdr:]...), uint16(3), uint8(0))
	f.Add(append([]byte(nil), p.mem[ringHdr:]...), uint16(0), uint8(0xff))
	f.Add(make([]byte, 64*cellSize), uint16(5), uint8(0))
	f.Fuzz(func(t *testing.T, cellsBytes []byte, head uint16, inPlace uint8) {
		m := ringMem(64)
		copy(m[ringHdr:], cellsBytes)
		c, err := newConsumer(m, maxMsg(64))
		if err != nil {
			t.Fatal(err)
		}
		c.head = uint64(head)
		dst := make([]byte, maxMsg(64)+64)
		for i := range 8 {
			n, ok, err := c.peek()
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("an error that is not ErrCorrupt: %v", err)
				}
				return
			}
			if !ok {
				return
			}
			if n > maxMsg(64) {
				t.Fatalf("accepted an entry of %d bytes", n)
			}
			if inPlace>>i&1 != 0 {
				if v, ok := c.view(n); ok {
					start := uintptr(unsafe.Pointer(unsafe.SliceData(v))) - uintptr(unsafe.Pointer(&m[0]))
					if len(v) != n || cap(v) != n || n > 0 && (start < ringHdr || start+uintptr(n) > uintptr(len(m))) {
						t.Fatalf("view of an entry of %d bytes: %d bytes at %d of a ring of %d", n, len(v), start, len(m))
					}
					c.release(n)
					continue
				}
			}
			guard := dst[n:]
			for i := range guard {
				guard[i] = 0xa5
			}
			c.consume(dst, n)
			for _, b := range guard {
				if b != 0xa5 {
					t.Fatal("consume wrote past the entry")
				}
			}
		}
	})
}

// TestRingWantsRoom: a producer that finds the ring full raises want; the consumer's next consume reports it once
// (and lowers it), and the producer then sees room to retry.
func TestRingWantsRoom(t *testing.T) {
	const cells = 64
	p, c := pair(t, cells)
	m := msgOf(1, 500)
	pushed := 0
	for {
		err := p.push(nil, m)
		if err == errAgain {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		pushed++
	}
	if pushed == 0 || *u32(p.mem, wantOff) != 1 {
		t.Fatalf("after %d pushes and a refusal: want %d, expected 1", pushed, *u32(p.mem, wantOff))
	}
	if p.room() {
		t.Fatal("room reported before the consumer freed anything")
	}
	dst := make([]byte, maxMsg(cells))
	for i := range pushed {
		n, ok, err := c.peek()
		if err != nil || !ok {
			t.Fatalf("entry %d: peek %v %v", i, ok, err)
		}
		if wanted := c.consume(dst, n); wanted != (i == 0) {
			t.Fatalf("consume %d reported wanted %v", i, wanted)
		}
		if !p.room() {
			t.Fatalf("no room reported after consume %d", i)
		}
	}
	if err := p.push(nil, m); err != nil {
		t.Fatalf("push after the ring drained: %v", err)
	}
	if *u32(p.mem, wantOff) != 0 {
		t.Fatal("want raised by a push that found room")
	}
}

// TestFullRingWakesProducer: a node whose progress goroutine sleeps (Wait) after a push found its ring into a peer
// full is woken when the peer frees room, not at its timeout: the device holds the message back meanwhile, and
// without CMA a large message streams through the ring in many such waits.
func TestFullRingWakesProducer(t *testing.T) {
	var eps [2]*endpoint
	for i := range 2 {
		ep, err := Provider{}.Open(rdma.EndpointConfig{Node: i, Nodes: 2, Secret: testSecret})
		if err != nil {
			t.Fatal(err)
		}
		defer ep.Close()
		eps[i] = ep.(*endpoint)
	}
	for i := range 2 {
		if err := eps[i].Connect(1-i, eps[1-i].Address()); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for eps[0].peer(1) == nil || eps[1].peer(0) == nil {
		if time.Now().After(deadline) {
			t.Fatal("the endpoints did not connect within 30 s")
		}
		runtime.Gosched()
	}
	payload := make([]byte, 4000)
	for {
		err := eps[0].Inject(1, []byte("hdr"), payload)
		if errors.Is(err, rdma.ErrAgain) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		eps[0].Wait(time.Minute)
	}()
	buf := make([]byte, 1<<20)
	for { // asleep first, so that the wake-up is what ends the Wait
		if state, ok := waitState(buf[:runtime.Stack(buf, true)]); ok && strings.HasPrefix(state, "IO wait") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Wait did not go to sleep within 30 s")
		}
		runtime.Gosched()
	}
	if err := eps[1].PostRecv(make([]byte, eps[1].maxMsg), nil, 1); err != nil {
		t.Fatal(err)
	}
	cs := make([]rdma.Completion, 4)
	for got := 0; got == 0; {
		n, err := eps[1].Poll(cs)
		if err != nil {
			t.Fatal(err)
		}
		got = n
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the producer slept on after the consumer freed room in its ring")
	}
}

// TestRingPowerOfTwo: a ring whose cells are not a power of two is refused, by either end and by Options (a
// position's cell is found with a mask).
func TestRingPowerOfTwo(t *testing.T) {
	m := ringMem(96)
	if _, err := newProducer(m); err == nil {
		t.Error("a producer took a ring of 96 cells")
	}
	if _, err := newConsumer(m, maxMsg(96)); err == nil {
		t.Error("a consumer took a ring of 96 cells")
	}
	if _, err := (Provider{Opts: Options{RingCells: 3000}}).Open(rdma.EndpointConfig{Node: 0, Nodes: 2, Secret: testSecret}); err == nil {
		t.Error("Open took 3000 cells per ring")
	}
}

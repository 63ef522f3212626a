package rdma

import (
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// countingEP registers memory and counts the registrations that are live; nothing else.
type countingEP struct {
	Endpoint // nil: only Register is used
	mu       sync.Mutex
	live     map[uint64]bool
	next     uint64
}

func (e *countingEP) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.live)
}

func (e *countingEP) isLive(k uint64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.live[k]
}

type countedMR struct {
	ep  *countingEP
	key uint64
}

func (m countedMR) Key() uint64                  { return m.key }
func (m countedMR) Desc() unsafe.Pointer         { return nil }
func (m countedMR) Addr(p unsafe.Pointer) uint64 { return uint64(uintptr(p)) }
func (m countedMR) Close() error {
	m.ep.mu.Lock()
	defer m.ep.mu.Unlock()
	if !m.ep.live[m.key] {
		return errors.New("closed twice")
	}
	delete(m.ep.live, m.key)
	return nil
}

func (e *countingEP) Register(b []byte, acc Access) (MR, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.next++
	e.live[e.next] = true
	return countedMR{e, e.next}, nil
}

func newCountingEP(*testing.T) *countingEP { return &countingEP{live: map[uint64]bool{}} }

//go:nosplit
func hideStack(p unsafe.Pointer) unsafe.Pointer {
	x := uintptr(p)
	return unsafe.Add(nil, x) // the uintptr round trip hides p from escape analysis: p stays on the stack
}

// stackSlice returns a slice of a local array that escape analysis keeps on the goroutine's stack, as a buffer
// of the rank layer could be if it ever stopped escaping, and hands it to f while the frame is live.
func stackSlice(f func([]byte)) {
	var a [4096]byte
	b := unsafe.Slice((*byte)(hideStack(unsafe.Pointer(&a[0]))), len(a))
	f(b)
	runtime.KeepAlive(&a)
}

// TestRegCacheRefusesStack: a goroutine stack never reaches a provider.
func TestRegCacheRefusesStack(t *testing.T) {
	ep := newCountingEP(t)
	c := newRegCache(ep, 8)
	stackSlice(func(b []byte) {
		if _, err := c.get(b, regAccess); !errors.Is(err, ErrNotHeap) {
			t.Fatalf("a stack buffer: %v, want ErrNotHeap", err)
		}
	})
	if ep.count() != 0 || c.size() != 0 {
		t.Fatal("a stack buffer was registered")
	}
	var global = staticBuf[:]
	e, err := c.get(global, regAccess)
	if err != nil {
		t.Fatalf("static memory: %v", err)
	}
	c.put(e)
}

var staticBuf [256]byte

// TestRegCacheHitsAndInvalidation: the same live buffer hits; a collected buffer's entry is deregistered by its
// cleanup; an entry whose buffer died is never taken for new memory at its address; the LRU bound evicts idle
// entries and never one in use.
func TestRegCacheHitsAndInvalidation(t *testing.T) {
	ep := newCountingEP(t)
	c := newRegCache(ep, 4)
	b := make([]byte, 1<<16)
	e1, err := c.get(b, regAccess)
	if err != nil {
		t.Fatal(err)
	}
	c.put(e1)
	e2, err := c.get(b, regAccess)
	if err != nil || e2 != e1 || c.hits.Load() != 1 {
		t.Fatalf("second get of a live buffer: %v, same entry %v, hits %d", err, e2 == e1, c.hits.Load())
	}
	c.put(e2)
	runtime.KeepAlive(b)

	// Drop b: its cleanup deregisters it.
	b = nil
	deadline := time.Now().Add(10 * time.Second)
	for c.size() != 0 || ep.count() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the entry of a collected buffer is still cached (%d) or registered (%d)", c.size(), ep.count())
		}
		runtime.GC()
		time.Sleep(time.Millisecond) // cleanups run on their own goroutine
	}

	// A stale entry (its buffer collected but the cleanup not yet run) is not taken for new memory at its
	// address: the weak pointer says the buffer died.
	x := make([]byte, 1<<16)
	ex, _ := c.get(x, regAccess)
	c.put(ex)
	ex.cleanup.Stop() // as if the cleanup had not run yet
	key := ex.key
	x = nil
	runtime.GC()
	runtime.GC()
	c.mu.Lock()
	stale := c.m[key]
	alive := stale != nil && stale.wp.Value() != nil
	c.mu.Unlock()
	if stale == nil || alive {
		t.Fatalf("setup: entry %v alive %v", stale != nil, alive)
	}
	// Make a buffer at the same address, if the allocator reuses it; either way get must not return the stale entry.
	for range 64 {
		y := make([]byte, 1<<16)
		ey, err := c.get(y, regAccess)
		if err != nil {
			t.Fatal(err)
		}
		if ey == stale {
			t.Fatal("a registration of collected memory was returned for a new buffer")
		}
		c.put(ey)
		if uintptr(unsafe.Pointer(&y[0])) == key.addr {
			break
		}
	}

	// LRU: in-use entries survive eviction.
	busy := make([]byte, 100)
	eb, _ := c.get(busy, regAccess)
	var keep [][]byte
	for range 10 {
		z := make([]byte, 100)
		keep = append(keep, z)
		ez, _ := c.get(z, regAccess)
		c.put(ez)
	}
	if c.size() > 4 {
		t.Fatalf("cache holds %d entries, bound 4", c.size())
	}
	c.mu.Lock()
	_, still := c.m[eb.key]
	c.mu.Unlock()
	if !still || !ep.isLive(eb.mr.Key()) {
		t.Fatal("an entry in use was evicted")
	}
	c.put(eb)
	c.close()
	if ep.count() != 0 {
		t.Fatalf("%d registrations left after close", ep.count())
	}
	runtime.KeepAlive(keep)
	runtime.KeepAlive(busy)
}

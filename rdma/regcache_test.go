package rdma

import (
	"errors"
	"math/rand/v2"
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
	c := newRegCache(ep, 8, 1<<30)
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
	c := newRegCache(ep, 4, 1<<30)
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

// refCache is the reference the cache is checked against: a list of keys, most recently used first, with the
// bounds applied the obvious way.
type refCache struct {
	max                     int
	maxBytes                int64
	list                    []*refEntry
	bytes                   int64
	hits, misses, evictions int64
}

type refEntry struct {
	buf, n int // which test buffer, how many of its bytes
	refs   int
}

func (r *refCache) over() bool { return len(r.list) > r.max || r.bytes > r.maxBytes }

func (r *refCache) evict() {
	for i := len(r.list) - 1; i >= 0 && r.over(); i-- {
		if e := r.list[i]; e.refs == 0 {
			r.list = append(r.list[:i], r.list[i+1:]...)
			r.bytes -= int64(e.n)
			r.evictions++
		}
	}
}

func (r *refCache) get(buf, n int) *refEntry {
	for i, e := range r.list {
		if e.buf == buf && e.n == n {
			r.hits++
			e.refs++
			copy(r.list[1:i+1], r.list[:i])
			r.list[0] = e
			return e
		}
	}
	r.misses++
	e := &refEntry{buf: buf, n: n, refs: 1}
	r.list = append([]*refEntry{e}, r.list...)
	r.bytes += int64(n)
	r.evict()
	return e
}

func (r *refCache) put(e *refEntry) {
	e.refs--
	if e.refs == 0 {
		r.evict()
	}
}

// TestRegCacheModel drives the cache with random gets and puts of a few buffers (whole or in part, so that one
// address has several keys) under random entry and byte bounds, against refCache: the same hits, misses and
// evictions, the same entries in the same LRU order with the same byte total, exactly the cached registrations
// live at the provider, and never an idle entry kept above a bound.
func TestRegCacheModel(t *testing.T) {
	seeds := 200
	if testing.Short() {
		seeds = 50
	}
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 14))
		ep := newCountingEP(t)
		ref := &refCache{max: 1 + rng.IntN(6), maxBytes: int64(64 + rng.IntN(8000))}
		c := newRegCache(ep, ref.max, ref.maxBytes)
		bufs := make([][]byte, 3+rng.IntN(8))
		for i := range bufs {
			bufs[i] = make([]byte, 1+rng.IntN(3000))
		}
		type held struct {
			e *regEntry
			r *refEntry
		}
		var hs []held
		for step := range 300 {
			if len(hs) > 0 && (rng.IntN(5) < 2 || len(hs) > 8) {
				i := rng.IntN(len(hs))
				h := hs[i]
				hs = append(hs[:i], hs[i+1:]...)
				c.put(h.e)
				ref.put(h.r)
			} else {
				i := rng.IntN(len(bufs))
				n := len(bufs[i])
				if rng.IntN(3) == 0 {
					n = (n + 1) / 2
				}
				e, err := c.get(bufs[i][:n], regAccess)
				if err != nil {
					t.Fatal(err)
				}
				hs = append(hs, held{e, ref.get(i, n)})
			}
			checkModel(t, seed, step, c, ref, ep, bufs)
		}
		for _, h := range hs {
			c.put(h.e)
			ref.put(h.r)
		}
		checkModel(t, seed, -1, c, ref, ep, bufs)
		c.close()
		if ep.count() != 0 {
			t.Fatalf("seed %d: %d registrations left after close", seed, ep.count())
		}
		runtime.KeepAlive(bufs)
	}
}

func checkModel(t *testing.T, seed, step int, c *regCache, ref *refCache, ep *countingEP, bufs [][]byte) {
	t.Helper()
	if c.hits.Load() != ref.hits || c.misses.Load() != ref.misses || c.evictions.Load() != ref.evictions {
		t.Fatalf("seed %d step %d: hits/misses/evictions %d/%d/%d, reference %d/%d/%d", seed, step, c.hits.Load(),
			c.misses.Load(), c.evictions.Load(), ref.hits, ref.misses, ref.evictions)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bytes != ref.bytes || len(c.m) != len(ref.list) {
		t.Fatalf("seed %d step %d: %d entries of %d bytes, reference %d of %d", seed, step, len(c.m), c.bytes,
			len(ref.list), ref.bytes)
	}
	idle := false
	i := 0
	for e := c.lru.next; e != &c.lru; e, i = e.next, i+1 {
		r := ref.list[i]
		if e.key.addr != uintptr(unsafe.Pointer(&bufs[r.buf][0])) || e.key.n != r.n || e.refs != r.refs {
			t.Fatalf("seed %d step %d: entry %d is (%#x, %d bytes, %d refs), reference (buffer %d, %d bytes, %d refs)",
				seed, step, i, e.key.addr, e.key.n, e.refs, r.buf, r.n, r.refs)
		}
		idle = idle || e.refs == 0
	}
	if live := ep.count(); live != len(c.m) {
		t.Fatalf("seed %d step %d: %d registrations live at the provider, %d cached", seed, step, live, len(c.m))
	}
	if idle && (len(c.m) > c.max || c.bytes > c.maxBytes) {
		t.Fatalf("seed %d step %d: an idle entry is kept above the bounds (%d entries, %d bytes)", seed, step, len(c.m), c.bytes)
	}
}

// TestRegCacheInUseSurvivesPressure: a registration in use by a transfer stays registered, and cached, however
// much other traffic presses on the bounds, even when it alone is above the byte bound; it goes once the
// transfer lets go of it.
func TestRegCacheInUseSurvivesPressure(t *testing.T) {
	ep := newCountingEP(t)
	c := newRegCache(ep, 4, 1<<20)
	big := make([]byte, 4<<20)
	eb, err := c.get(big, regAccess)
	if err != nil {
		t.Fatal(err)
	}
	var keep [][]byte
	for i := range 32 {
		b := make([]byte, 256<<10)
		keep = append(keep, b)
		e, err := c.get(b, regAccess)
		if err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			// A second transfer of the big buffer while the first is under way: the same registration.
			e2, err := c.get(big, regAccess)
			if err != nil || e2 != eb {
				t.Fatalf("the in-use buffer was registered again (%v)", err)
			}
			c.put(e2)
		}
		c.put(e)
		if !ep.isLive(eb.mr.Key()) {
			t.Fatal("a registration in use was deregistered")
		}
		// The big entry alone exceeds the byte bound: every idle entry goes.
		if c.size() != 1 || c.cachedBytes() != int64(len(big)) {
			t.Fatalf("after %d transfers: %d entries of %d bytes cached, want only the one in use", i+1, c.size(), c.cachedBytes())
		}
	}
	c.put(eb)
	if c.size() != 0 || ep.count() != 0 {
		t.Fatalf("the idle buffer above the byte bound is still registered (%d cached, %d live)", c.size(), ep.count())
	}
	runtime.KeepAlive(keep)
	runtime.KeepAlive(big)
}

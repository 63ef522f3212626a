package rdma

import (
	"errors"
	"runtime"

	"github.com/gompj/gompj/device"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"
)

// ErrNotHeap is returned for memory the device will not register: not in the Go heap (a goroutine stack moves when
// it grows or shrinks; a pointer into it must never leave the process) nor static.
var ErrNotHeap = errors.New("rdma: the buffer is not Go heap memory (a goroutine stack?)")

// regAccess is what every registration of the cache allows: a buffer sent from today may be received into
// tomorrow, and one registration serves both.
const regAccess = AccessLocal | AccessRemoteRead | AccessRemoteWrite

// regCache is the pin-down cache (Tezuka et al.): a registration outlives its transfer, so that a buffer used
// again is not registered again. Go memory needs more care than C's:
//   - Only heap or static memory is registered. runtime.AddCleanup refuses anything else (it panics, which get
//     turns into ErrNotHeap), so a stack address never reaches a provider.
//   - A registration is for an object, not an address: the GC frees unreferenced objects and reuses their memory.
//     Each entry keeps a weak pointer to its buffer and is used only while that pointer is alive; the weak pointer
//     is cleared before the memory can be reused, so a stale entry is never taken for a live one.
//   - The cleanup deregisters an entry once its buffer is collected.
//   - Two bounds hold the cache: how many entries it keeps (max) and how many bytes they register (maxBytes).
//     Registered bytes are what matters on a NIC (pinned pages count against RLIMIT_MEMLOCK and the NIC's
//     translation tables): a program that sends a few huge buffers would otherwise keep them all pinned. Past
//     either bound, the least recently used idle entries are deregistered, when a new entry comes in and when a
//     transfer lets go of one; so a buffer larger than maxBytes alone is registered for its transfer only.
//
// An entry in use by a transfer (refs > 0) is never deregistered; the transfer also keeps its buffer referenced.
// In-use entries count toward the bounds, so the cache may stay above them while they are in use, never longer.
type regCache struct {
	ep       Endpoint
	max      int
	maxBytes int64
	ref      *cacheRef // what cleanups reach the cache through, cut at close so that the cache can be collected

	mu     sync.Mutex
	m      map[regKey]*regEntry
	byID   map[uint64]*regEntry
	lru    regEntry // sentinel of the list of entries in m, most recent first
	bytes  int64    // bytes the entries of m register
	closed bool
	nextID atomic.Uint64

	hits, misses, evictions atomic.Int64 // for tests; evictions: idle entries deregistered by the bounds
}

type regKey struct {
	addr uintptr
	n    int
	acc  Access
}

type regEntry struct {
	key        regKey
	id         uint64
	mr         MR
	wp         weak.Pointer[byte]
	cleanup    runtime.Cleanup
	refs       int
	cached     bool // in m and on the list
	prev, next *regEntry
}

type cacheRef struct {
	mu sync.Mutex
	c  *regCache
}

type regArg struct {
	ref *cacheRef
	id  uint64
}

func newRegCache(ep Endpoint, max int, maxBytes int64) *regCache {
	c := &regCache{ep: ep, max: max, maxBytes: maxBytes, m: map[regKey]*regEntry{}, byID: map[uint64]*regEntry{}}
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	c.ref = &cacheRef{c: c}
	return c
}

func (c *regCache) unlink(e *regEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (c *regCache) front(e *regEntry) {
	e.next, e.prev = c.lru.next, &c.lru
	c.lru.next.prev = e
	c.lru.next = e
}

// get returns a registration of b with access acc, holding a reference until put. len(b) > 0.
func (c *regCache) get(b []byte, acc Access) (*regEntry, error) {
	p := &b[0]
	k := regKey{addr: uintptr(unsafe.Pointer(p)), n: len(b), acc: acc}
	var drop []*regEntry
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errors.New("rdma: registration cache closed")
	}
	if e := c.m[k]; e != nil {
		if e.wp.Value() == p {
			e.refs++
			c.unlink(e)
			c.front(e)
			c.mu.Unlock()
			c.hits.Add(1)
			return e, nil
		}
		// The buffer this entry registered was collected and its memory reused.
		drop = c.uncacheLocked(e, drop)
	}
	c.mu.Unlock()
	c.deregister(drop)
	c.misses.Add(1)

	if isLent(b) {
		// Lent memory (NoteLent) is registered for the transfer alone: it is not Go memory, so no collection ends
		// it, only Free, which a transfer in flight forbids.
		mr, err := c.ep.Register(b, acc)
		if err != nil {
			return nil, err
		}
		return &regEntry{key: k, mr: mr, refs: 1}, nil
	}
	id := c.nextID.Add(1)
	cl, ok := addCleanup(p, regArg{ref: c.ref, id: id})
	if !ok {
		return nil, ErrNotHeap
	}
	e := &regEntry{key: k, id: id, wp: weak.Make(p), cleanup: cl, refs: 1}
	mr, err := c.ep.Register(b, acc)
	if err != nil {
		cl.Stop()
		return nil, err
	}
	e.mr = mr
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return e, nil // registered for this transfer only; put deregisters it
	}
	if old := c.m[k]; old != nil {
		drop = c.uncacheLocked(old, drop[:0])
	}
	c.m[k] = e
	c.byID[id] = e
	c.bytes += int64(k.n)
	e.cached = true
	c.front(e)
	drop = c.evictLocked(drop)
	c.mu.Unlock()
	c.deregister(drop)
	return e, nil
}

// over reports whether the cache is above one of its bounds.
func (c *regCache) over() bool { return len(c.m) > c.max || c.bytes > c.maxBytes }

// evictLocked takes least recently used idle entries out of the cache (appending them to drop, to be
// deregistered) until it is within its bounds or only entries in use are left.
func (c *regCache) evictLocked(drop []*regEntry) []*regEntry {
	if !c.over() {
		return drop
	}
	for v := c.lru.prev; v != &c.lru && c.over(); {
		prev := v.prev
		if v.refs == 0 {
			drop = c.uncacheLocked(v, drop)
			c.evictions.Add(1)
		}
		v = prev
	}
	return drop
}

// uncacheLocked takes e out of the cache; it is deregistered now (appended to drop) if no transfer uses it, else
// by the last put.
func (c *regCache) uncacheLocked(e *regEntry, drop []*regEntry) []*regEntry {
	if e.cached {
		e.cached = false
		delete(c.m, e.key)
		delete(c.byID, e.id)
		c.bytes -= int64(e.key.n)
		c.unlink(e)
	}
	if e.refs == 0 {
		drop = append(drop, e)
	}
	return drop
}

func (c *regCache) deregister(es []*regEntry) {
	for _, e := range es {
		e.cleanup.Stop()
		e.mr.Close()
	}
}

// put drops a transfer's reference. An entry that becomes idle while the cache is above a bound may be evicted
// at once, this one included (a buffer larger than the byte bound is not kept past its transfer).
func (c *regCache) put(e *regEntry) {
	if e == nil {
		return
	}
	var one [1]*regEntry
	drop := one[:0]
	c.mu.Lock()
	e.refs--
	if e.refs == 0 {
		if !e.cached {
			drop = append(drop, e)
		} else {
			drop = c.evictLocked(drop)
		}
	}
	c.mu.Unlock()
	c.deregister(drop)
}

// collected is the cleanup of an entry whose buffer the GC collected.
func (c *regCache) collected(id uint64) {
	c.mu.Lock()
	var drop []*regEntry
	if e := c.byID[id]; e != nil {
		drop = c.uncacheLocked(e, nil)
	}
	c.mu.Unlock()
	for _, e := range drop {
		e.mr.Close() // the cleanup has run: no Stop
	}
}

// close deregisters every idle entry; entries still in use go with their last put.
func (c *regCache) close() {
	c.ref.mu.Lock()
	c.ref.c = nil
	c.ref.mu.Unlock()
	c.mu.Lock()
	c.closed = true
	var drop []*regEntry
	for _, e := range c.m {
		drop = c.uncacheLocked(e, drop)
	}
	c.mu.Unlock()
	c.deregister(drop)
}

// size reports how many registrations are cached (tests).
func (c *regCache) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// cachedBytes reports how many bytes the cached registrations cover (tests).
func (c *regCache) cachedBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

func cleanupReg(a regArg) {
	a.ref.mu.Lock()
	c := a.ref.c
	a.ref.mu.Unlock()
	if c != nil {
		c.collected(a.id)
	}
}

// addCleanup attaches the entry's cleanup to the object holding p. It reports false when p is not in the Go heap
// or static memory: AddCleanup panics for such a pointer.
func addCleanup(p *byte, a regArg) (cl runtime.Cleanup, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return runtime.AddCleanup(p, cleanupReg, a), true
}

// registration is a buffer registered through Device.Register: a cache entry held, and pinned, until Release.
type registration struct {
	d   *Device
	e   *regEntry
	pin runtime.Pinner
	rel sync.Once
}

func (g *registration) Release() {
	g.rel.Do(func() {
		g.pin.Unpin()
		g.d.cache.put(g.e)
	})
}

// Register implements device.Registrar: b stays registered (and in the cache, so that its transfers find it)
// until the registration is released.
func (d *Device) Register(b []byte) (device.Registration, error) {
	if len(b) == 0 {
		return &registration{d: d}, nil
	}
	e, err := d.cache.get(b, regAccess)
	if err != nil {
		return nil, err
	}
	g := &registration{d: d, e: e}
	g.pin.Pin(&b[0])
	return g, nil
}

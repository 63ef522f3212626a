//go:build linux

package shm

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"
)

// Ring layout, in a shared mapping written by the producer (one process, any number of its goroutines) and the
// consumer (another process):
//
//	offset  size  field
//	0       8     head: cells the consumer has consumed (consumer writes, producers read)
//	64      4     want: a producer found no room and waits for some (producers set it, the consumer clears it)
//	128     N*64  cells (N a power of two: a position's cell is a mask away, not a division)
//
// A message is an entry of k consecutive cells (wrapping at the end): the first cell starts with
//
//	0  8  seq    position of the entry's first cell + 1; stored last, atomically (publication)
//	8  4  len    message bytes
//	12 4  cells  k = (16 + len + 63) / 64
//
// and the message's bytes follow from byte 16, through the next cells. Positions count cells from 0 and never
// wrap (64 bits). A producer reserves cells with a compare-and-swap on a tail it keeps in its own memory (no
// lock, no shared tail), checks free room against head, writes, then publishes seq. The consumer looks only at
// the cell at its head: a seq of head+1 means an entry is there. Once it has copied an entry out it clears the
// seq word of each of its cells (so that stale bytes are never taken for a publication) and then advances head.
//
// A producer that finds no room raises want, then looks at head once more; a consumer that advances head then
// looks at want, and if it is up lowers it and wakes the producer's node (endpoint.Poll). Both orders are
// sequentially consistent, so either the producer's second look sees the room or the consumer sees want: a
// producer whose progress goroutine sleeps because the ring was full is woken when it frees up, instead of at its
// next timed look (1 ms or more; a 2 MiB alltoallv among 4 ranks in 2 node processes without CMA, whose rendezvous
// data streams through these rings, took 35 ms, nearly all of it asleep).
const (
	wantOff    = 64
	cellSize   = 64
	entryHdr   = 16
	ringHdr    = 128
	minCells   = 64
	maxRingLen = 64 << 20
)

// ErrCorrupt is wrapped by errors about a ring whose contents no correct peer writes.
var ErrCorrupt = errors.New("shm: corrupt ring entry")

// ringBytes is the size of a ring of n cells.
func ringBytes(cells int) int { return ringHdr + cells*cellSize }

// entryCells is how many cells a message of n bytes takes.
func entryCells(n int) uint64 { return uint64(entryHdr+n+cellSize-1) / cellSize }

// producer is the sending end of a ring, in the producer's process.
type producer struct {
	mem    []byte // the ring's mapping
	cells  uint64
	tail   atomic.Uint64 // next position to reserve
	cached atomic.Uint64 // head as last read
}

// consumer is the receiving end of a ring, in the consumer's process; one goroutine uses it at a time.
type consumer struct {
	mem   []byte
	cells uint64
	head  uint64
	max   int // largest message accepted
}

func u64(b []byte, off uint64) *uint64 { return (*uint64)(unsafe.Pointer(&b[off])) }

func newProducer(mem []byte) (*producer, error) {
	n, err := ringCells(mem)
	if err != nil {
		return nil, err
	}
	return &producer{mem: mem, cells: n}, nil
}

func newConsumer(mem []byte, max int) (*consumer, error) {
	n, err := ringCells(mem)
	if err != nil {
		return nil, err
	}
	return &consumer{mem: mem, cells: n, max: max}, nil
}

func ringCells(mem []byte) (uint64, error) {
	if len(mem) < ringBytes(minCells) || len(mem) > maxRingLen || (len(mem)-ringHdr)%cellSize != 0 ||
		uintptr(unsafe.Pointer(&mem[0]))%cellSize != 0 {
		return 0, fmt.Errorf("shm: a ring of %d bytes", len(mem))
	}
	n := uint64(len(mem)-ringHdr) / cellSize
	if n&(n-1) != 0 {
		return 0, fmt.Errorf("shm: a ring of %d cells, not a power of two", n)
	}
	return n, nil
}

// maxMsg is the largest message a ring of n cells carries: a quarter of it, so that a few fit at once.
func maxMsg(cells uint64) int { return int(cells*cellSize/4) - entryHdr }

// push writes hdr and payload as one entry. It returns errAgain when the ring has no room now, and an error
// wrapping ErrCorrupt when the consumer's head makes no sense.
func (p *producer) push(hdr, payload []byte) error {
	n := len(hdr) + len(payload)
	k := entryCells(n)
	if n > maxMsg(p.cells) {
		return fmt.Errorf("shm: message of %d bytes over the ring's %d", n, maxMsg(p.cells))
	}
	var t uint64
	asked := false
	for {
		t = p.tail.Load()
		h := p.cached.Load()
		if h > t {
			continue // t is stale: another producer reserved and saw a later head meanwhile
		}
		if t+k-h > p.cells {
			// A correct head is at most the tail, and at most a ring behind it, at the instant it is read: between
			// the tail before the read and the tail after.
			c1 := p.tail.Load()
			h = atomic.LoadUint64(u64(p.mem, 0))
			c2 := p.tail.Load()
			if h > c2 || c1 > h && c1-h > p.cells {
				return fmt.Errorf("%w: the consumer's head %d is not within %d cells before the tail (%d..%d)", ErrCorrupt, h, p.cells, c1, c2)
			}
			for {
				c := p.cached.Load()
				if c >= h || p.cached.CompareAndSwap(c, h) {
					break
				}
			}
			if h > t {
				continue
			}
			if t+k-h > p.cells {
				if !asked { // ask to be woken, then look at head once more (see the layout)
					atomic.StoreUint32(u32(p.mem, wantOff), 1)
					asked = true
					continue
				}
				return errAgain
			}
		}
		if p.tail.CompareAndSwap(t, t+k) {
			break
		}
	}
	first := ringHdr + (t&(p.cells-1))*cellSize
	p.put(first+entryHdr, hdr)
	p.put(first+entryHdr+uint64(len(hdr)), payload)
	*(*uint32)(unsafe.Pointer(&p.mem[first+8])) = uint32(n)
	*(*uint32)(unsafe.Pointer(&p.mem[first+12])) = uint32(k)
	atomic.StoreUint64(u64(p.mem, first), t+1)
	return nil
}

// put copies b into the cell area at byte offset off (from the ring's start), wrapping at the end.
func (p *producer) put(off uint64, b []byte) {
	if len(b) == 0 {
		return
	}
	end := uint64(ringHdr) + p.cells*cellSize
	if off >= end {
		off -= p.cells * cellSize
	}
	if n := copy(p.mem[off:end], b); n < len(b) {
		copy(p.mem[ringHdr:], b[n:]) // wrapped
	}
}

// peek reports the length of the entry at the head, if one is published. An entry that no correct producer
// writes is an error wrapping ErrCorrupt.
func (c *consumer) peek() (n int, ok bool, err error) {
	first := ringHdr + (c.head&(c.cells-1))*cellSize
	s := atomic.LoadUint64(u64(c.mem, first))
	if s == 0 {
		return 0, false, nil
	}
	if s != c.head+1 {
		return 0, false, fmt.Errorf("%w: sequence %d where %d is expected", ErrCorrupt, s, c.head+1)
	}
	n = int(*(*uint32)(unsafe.Pointer(&c.mem[first+8])))
	k := uint64(*(*uint32)(unsafe.Pointer(&c.mem[first+12])))
	if n > c.max || n > maxMsg(c.cells) || k != entryCells(n) {
		return 0, false, fmt.Errorf("%w: an entry of %d bytes in %d cells (largest %d)", ErrCorrupt, n, k, min(c.max, maxMsg(c.cells)))
	}
	return n, true, nil
}

// consume copies the entry at the head (of n bytes, as peek said) into dst[:n], frees its cells and advances the
// head. The producer may scribble on the entry meanwhile; dst then holds garbage, which the protocol's decoder
// rejects, but nothing outside dst and the ring is touched. It reports whether a producer waits for room (want,
// which it lowers): the caller wakes the producer's node.
func (c *consumer) consume(dst []byte, n int) (wanted bool) {
	first := ringHdr + (c.head&(c.cells-1))*cellSize
	k := entryCells(n)
	end := uint64(ringHdr) + c.cells*cellSize
	off := first + entryHdr
	if off >= end {
		off -= c.cells * cellSize
	}
	m := copy(dst[:n], c.mem[off:min(end, off+uint64(n))])
	copy(dst[m:n], c.mem[ringHdr:])
	return c.free(k)
}

// view returns the n bytes of the entry at the head (as peek said) where they lie in the ring, if they do not wrap
// around its end. They stay there until free.
func (c *consumer) view(n int) ([]byte, bool) {
	off := ringHdr + (c.head&(c.cells-1))*cellSize + entryHdr
	end := uint64(ringHdr) + c.cells*cellSize
	if off+uint64(n) > end {
		return nil, false
	}
	return c.mem[off : off+uint64(n) : off+uint64(n)], true
}

// release frees the entry at the head, of n bytes (as peek said), and advances the head, as consume does once it
// has copied it out. It reports whether a producer waits for room (see consume).
func (c *consumer) release(n int) (wanted bool) { return c.free(entryCells(n)) }

// free clears the seq word of each of the k cells at the head, advances the head past them and lowers want.
func (c *consumer) free(k uint64) (wanted bool) {
	for i := range k {
		atomic.StoreUint64(u64(c.mem, ringHdr+((c.head+i)&(c.cells-1))*cellSize), 0)
	}
	c.head += k
	atomic.StoreUint64(u64(c.mem, 0), c.head)
	w := u32(c.mem, wantOff)
	return atomic.LoadUint32(w) != 0 && atomic.SwapUint32(w, 0) != 0
}

// room reports whether the consumer has freed cells since the producer last looked at its head (push, which
// records the head it saw): a producer that found the ring full has something to retry.
func (p *producer) room() bool {
	return atomic.LoadUint64(u64(p.mem, 0)) > p.cached.Load()
}

// ready reports whether an entry (or garbage) is published at the head, without validating it. It reads the
// head as published, so any goroutine may ask while the consuming one works.
func (c *consumer) ready() bool {
	h := atomic.LoadUint64(u64(c.mem, 0))
	return atomic.LoadUint64(u64(c.mem, ringHdr+(h&(c.cells-1))*cellSize)) != 0
}

var errAgain = errors.New("shm: ring full")

package rdma

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/gompj/gompj/device"
)

// Completion contexts: the top byte says what the low bits index.
const (
	ctxRecv  uint64 = 1 << 56 // a receive buffer of the pool
	ctxSend  uint64 = 2 << 56 // a bounce buffer of a Send
	ctxRead  uint64 = 3 << 56 // a rendezvous receive's Read
	ctxWrite uint64 = 4 << 56 // a rendezvous send's Write
	ctxKind  uint64 = 0xff << 56
)

// slab is memory the device owns, registered once and pinned for the device's life: the provider may hand its
// address to a NIC or to another process.
type slab struct {
	mem []byte
	mr  MR
	pin runtime.Pinner
}

func newSlab(ep Endpoint, size int, acc Access) (*slab, error) {
	s := &slab{mem: make([]byte, size)}
	s.pin.Pin(&s.mem[0])
	mr, err := ep.Register(s.mem, acc)
	if err != nil {
		s.pin.Unpin()
		return nil, fmt.Errorf("rdma: registering %d bytes of buffers: %w", size, err)
	}
	s.mr = mr
	return s, nil
}

func (s *slab) close() {
	s.mr.Close()
	s.pin.Unpin()
}

// lineUp rounds n up to a cache line.
func lineUp(n int) int { return (n + 63) &^ 63 }

// rxBuf is one posted receive buffer. Its Inbound is what the sink gets for an eager message; Release finds the
// rxBuf again from it (in is the first field).
type rxBuf struct {
	in     device.Inbound
	idx    int
	buf    []byte
	peer   int  // the node whose eager message it holds
	copied bool // a heap copy held for order (unordered providers): no buffer to repost
}

// rxPool is the device's receive buffers, all posted except those holding an eager message the sink has not
// released.
type rxPool struct {
	d    *Device
	sl   *slab
	bufs []rxBuf
}

func newRxPool(d *Device, n int) (*rxPool, error) {
	size := lineUp(d.bufSize)
	sl, err := newSlab(d.ep, n*size, AccessLocal)
	if err != nil {
		return nil, err
	}
	p := &rxPool{d: d, sl: sl, bufs: make([]rxBuf, n)}
	for i := range p.bufs {
		b := &p.bufs[i]
		b.idx = i
		b.buf = sl.mem[i*size : i*size+d.bufSize : i*size+d.bufSize]
		if err := d.ep.PostRecv(b.buf, sl.mr, ctxRecv|uint64(i)); err != nil {
			sl.close()
			return nil, fmt.Errorf("rdma: posting receive %d of %d: %w", i, n, err)
		}
	}
	return p, nil
}

// get returns the buffer of a receive completion's context, or nil if it names none.
func (p *rxPool) get(ctx uint64) *rxBuf {
	i := ctx &^ ctxKind
	if ctx&ctxKind != ctxRecv || i >= uint64(len(p.bufs)) {
		return nil
	}
	return &p.bufs[i]
}

// repost gives b back to the provider.
func (p *rxPool) repost(b *rxBuf) {
	b.in = device.Inbound{}
	// A closed endpoint refuses; nothing is left to receive then.
	p.d.ep.PostRecv(b.buf, p.sl.mr, ctxRecv|uint64(b.idx))
}

func (p *rxPool) close() {
	if p != nil {
		p.sl.close()
	}
}

func inboundBuf(in *device.Inbound) *rxBuf { return (*rxBuf)(unsafe.Pointer(in)) }

// txBuf is a bounce buffer for a message longer than the provider injects.
type txBuf struct {
	idx int
	buf []byte
}

// txPool is the device's bounce buffers for Send.
type txPool struct {
	sl   *slab
	mu   sync.Mutex
	bufs []txBuf
	free []int
}

func newTxPool(d *Device, n int) (*txPool, error) {
	if d.caps.InjectSize >= d.bufSize {
		return &txPool{}, nil // everything is injected
	}
	size := lineUp(d.bufSize)
	sl, err := newSlab(d.ep, n*size, AccessLocal)
	if err != nil {
		return nil, err
	}
	p := &txPool{sl: sl, bufs: make([]txBuf, n), free: make([]int, 0, n)}
	for i := range p.bufs {
		p.bufs[i] = txBuf{idx: i, buf: sl.mem[i*size : i*size+d.bufSize : i*size+d.bufSize]}
		p.free = append(p.free, n-1-i)
	}
	return p, nil
}

// get returns a free bounce buffer, or nil if all are in flight.
func (p *txPool) get() *txBuf {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.free)
	if n == 0 {
		return nil
	}
	i := p.free[n-1]
	p.free = p.free[:n-1]
	return &p.bufs[i]
}

// put frees the bounce buffer of a send completion's context.
func (p *txPool) put(ctx uint64) bool {
	i := ctx &^ ctxKind
	if ctx&ctxKind != ctxSend || i >= uint64(len(p.bufs)) {
		return false
	}
	p.mu.Lock()
	p.free = append(p.free, int(i))
	p.mu.Unlock()
	return true
}

func (p *txPool) close() {
	if p != nil && p.sl != nil {
		p.sl.close()
	}
}

// pins holds a transfer's pins until it completes: a runtime.Pinner taken from pinnerPool at the first Pin and
// given back at Unpin. A Pinner allocated afresh sets a finalizer on its first Pin (runtime.SetFinalizer, under a
// lock), and the runtime keeps only one spare per P: with a window of transfers in flight (osu_bw's 64 sends of
// 64 KiB over a pair of shm devices), that and the finalizers' work were 6.7 % of the CPU profile. A pooled Pinner
// keeps its own.
type pins struct{ p *runtime.Pinner }

var pinnerPool = sync.Pool{New: func() any { return new(runtime.Pinner) }}

func (x *pins) Pin(ptr any) {
	if x.p == nil {
		x.p = pinnerPool.Get().(*runtime.Pinner)
	}
	x.p.Pin(ptr)
}

func (x *pins) Unpin() {
	if x.p != nil {
		x.p.Unpin()
		pinnerPool.Put(x.p)
		x.p = nil
	}
}

//go:build linux

package netdev

import (
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/gompj/gompj/device"
)

// coalesceSize is the size of the buffers queued small frames are packed into.
const coalesceSize = 64 << 10

// errByeSent is returned for frames handed to a connection after its goodbye.
var errByeSent = errors.New("netdev: connection is closing")

// conn is one TCP connection to a peer. Its write side (fd, queue) is guarded by mu and used by rank goroutines and
// the progress loop; its read side belongs to the progress loop.
type conn struct {
	d      *Device
	p      *peer
	id     int32
	stripe int
	lim    limits

	mu        sync.Mutex
	fd        int   // -1 until attached; set and cleared by the loop
	dead      error // no more writes
	byeSent   bool
	dialing   bool // a dial for this slot is under way (lazy mode)
	q         outq
	hdr       [HeaderSize]byte
	iov       [maxIov]unix.Iovec
	completed []*rdvSend // streams fully written, to complete once mu is released

	// Owned by the progress loop.
	rx         rx
	registered bool
	byeRecv    bool
	closed     bool
	cur        *device.Inbound
	claim      device.Completer // the receive an eager payload being read goes into (see EagerClaimer)
	curRecv    *rdvRecv
}

func (d *Device) newConn(p *peer, stripe int) *conn {
	c := &conn{d: d, p: p, stripe: stripe, fd: -1}
	c.lim = limits{
		ranks:      d.ranks,
		nodeOf:     d.nodeOfRank,
		self:       d.self,
		peer:       p.id,
		maxEager:   uint64(d.eager),
		maxData:    uint64(d.cfg.ChunkSize),
		maxMessage: d.cfg.MaxMessage,
	}
	return c
}

func (d *Device) nodeOfRank(r int) int { return int(d.rankNode[r]) }

// seg is one entry of an outbound queue: owned bytes (coalesced frames) or a rendezvous payload streamed in chunks.
type seg struct {
	buf *[]byte
	off int
	rdv *rdvSend
}

type outq struct {
	segs []seg
	head int
}

func (q *outq) empty() bool { return q.head == len(q.segs) }

// appendCopy queues a copy of b, packing it into the last buffer when it fits.
func (c *conn) appendCopy(b []byte) {
	if len(b) == 0 {
		return
	}
	q := &c.q
	if n := len(q.segs); n > q.head {
		if last := &q.segs[n-1]; last.buf != nil && cap(*last.buf)-len(*last.buf) >= len(b) {
			*last.buf = append(*last.buf, b...)
			return
		}
	}
	buf := c.d.bufs.get(max(len(b), coalesceSize))
	*buf = append(*buf, b...)
	q.push(seg{buf: buf})
}

func (q *outq) push(s seg) {
	if q.head == len(q.segs) {
		q.segs = q.segs[:0]
		q.head = 0
	} else if q.head > 32 && q.head > len(q.segs)/2 {
		n := copy(q.segs, q.segs[q.head:])
		clear(q.segs[n:])
		q.segs = q.segs[:n]
		q.head = 0
	}
	q.segs = append(q.segs, s)
}

// send writes one frame: straight to the socket when nothing is queued ahead of it, the rest (or all of it, if the
// connection is busy or not up yet) copied to the queue for the progress loop.
func (c *conn) send(h *device.Header, payload []byte) error {
	c.mu.Lock()
	err := c.sendLocked(h, payload)
	c.mu.Unlock()
	return err
}

func (c *conn) sendLocked(h *device.Header, payload []byte) error {
	if c.dead != nil {
		return c.dead
	}
	if c.byeSent {
		return &PeerError{Node: c.p.id, Addr: c.p.addr, Kind: ErrPeerClosed, Err: errByeSent}
	}
	return c.frameLocked(h, payload)
}

func (c *conn) frameLocked(h *device.Header, payload []byte) error {
	putHeader(c.hdr[:], h, c.p.takeOwed())
	if c.fd < 0 {
		c.appendCopy(c.hdr[:])
		c.appendCopy(payload)
		if c.d.cfg.Lazy && !c.dialing {
			c.dialing = true
			p, s := c.p, c.stripe
			c.d.spawn(func() { c.d.dial(p, s) })
		}
		return nil
	}
	if !c.q.empty() {
		c.appendCopy(c.hdr[:])
		c.appendCopy(payload)
		return nil
	}
	n, err := c.writeDirect(c.hdr[:], payload)
	if err != nil && err != unix.EAGAIN {
		return c.failLocked(err)
	}
	if n < HeaderSize {
		c.appendCopy(c.hdr[n:])
		n = HeaderSize
	}
	c.appendCopy(payload[n-HeaderSize:])
	return nil
}

// failLocked marks the connection dead after a write error and asks the loop to fail the peer.
func (c *conn) failLocked(err error) error {
	if c.dead == nil {
		c.dead = &PeerError{Node: c.p.id, Addr: c.p.addr, Kind: ErrPeerLost, Err: err}
		perr := c.dead
		d, p := c.d, c.p
		d.post(func() { d.failPeer(p, perr, true) })
	}
	return c.dead
}

// writeDirect writes a then b until done or the socket is full.
func (c *conn) writeDirect(a, b []byte) (int, error) {
	total := len(a) + len(b)
	done := 0
	for done < total {
		k := 0
		if done < len(a) {
			setIov(&c.iov[k], a[done:])
			k++
			if len(b) > 0 {
				setIov(&c.iov[k], b)
				k++
			}
		} else {
			setIov(&c.iov[k], b[done-len(a):])
			k++
		}
		n, err := writev(c.fd, c.iov[:k])
		if err != nil {
			return done, err
		}
		done += n
	}
	return done, nil
}

// flushLocked writes queued frames until the queue is empty or the socket is full. Streams fully written are
// collected in c.completed. Called by the progress loop only.
func (c *conn) flushLocked() error {
	for !c.q.empty() {
		k := 0
		for i := c.q.head; i < len(c.q.segs) && k < maxIov-2; i++ {
			s := &c.q.segs[i]
			if r := s.rdv; r != nil {
				if !r.inChunk {
					c.beginChunk(r)
				}
				if r.hoff < HeaderSize {
					setIov(&c.iov[k], r.hdr[r.hoff:])
					k++
				}
				setIov(&c.iov[k], r.payload[r.sent:r.chunkEnd])
				k++
				break
			}
			setIov(&c.iov[k], (*s.buf)[s.off:])
			k++
		}
		n, err := writev(c.fd, c.iov[:k])
		if err == unix.EAGAIN {
			return nil
		}
		if err != nil {
			return err
		}
		c.consume(n)
	}
	return nil
}

// beginChunk prepares the DATA header of a stream's next chunk.
func (c *conn) beginChunk(r *rdvSend) {
	r.chunkEnd = min(len(r.payload), r.sent+c.d.cfg.ChunkSize)
	h := r.h
	h.Kind = device.KindData
	h.Length = uint64(r.chunkEnd - r.sent)
	putHeader(r.hdr[:], &h, c.p.takeOwed())
	r.hoff = 0
	r.inChunk = true
}

// consume drops n written bytes from the head of the queue.
func (c *conn) consume(n int) {
	q := &c.q
	for n > 0 {
		s := &q.segs[q.head]
		if r := s.rdv; r != nil {
			if h := HeaderSize - r.hoff; h > 0 {
				x := min(h, n)
				r.hoff += x
				n -= x
			}
			x := min(r.chunkEnd-r.sent, n)
			r.sent += x
			n -= x
			if r.sent < r.chunkEnd {
				continue
			}
			r.inChunk = false
			if r.sent == len(r.payload) {
				*s = seg{}
				q.head++
				c.completed = append(c.completed, r)
				continue
			}
			// Let frames queued behind the stream go before its next chunk.
			if q.head+1 < len(q.segs) {
				*s = seg{}
				q.head++
				q.push(seg{rdv: r})
			}
			continue
		}
		rem := len(*s.buf) - s.off
		if n < rem {
			s.off += n
			return
		}
		n -= rem
		c.d.bufs.put(s.buf)
		*s = seg{}
		q.head++
	}
}

// dropQueueLocked empties the queue of a dead connection; streams in it are returned for failing.
func (c *conn) dropQueueLocked() []*rdvSend {
	var streams []*rdvSend
	for i := c.q.head; i < len(c.q.segs); i++ {
		s := c.q.segs[i]
		if s.rdv != nil {
			streams = append(streams, s.rdv)
		} else if s.buf != nil {
			c.d.bufs.put(s.buf)
		}
	}
	c.q.segs = c.q.segs[:0]
	c.q.head = 0
	return streams
}

// sendCredit returns owed credit in a frame of its own, unless another frame took it meanwhile.
func (c *conn) sendCredit() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead != nil || c.byeSent || c.p.owed.Load() < c.d.batch {
		return
	}
	h := nodeHeader(kindCredit)
	c.frameLocked(&h, nil)
}

// queueBye queues the goodbye behind everything already queued; the caller (the loop) flushes.
func (c *conn) queueBye() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead != nil || c.byeSent {
		return
	}
	h := nodeHeader(kindBye)
	putHeader(c.hdr[:], &h, 0)
	c.appendCopy(c.hdr[:])
	c.byeSent = true
}

func (c *conn) String() string {
	return fmt.Sprintf("connection %d to node %d (%s) stripe %d", c.id, c.p.id, c.p.addr, c.stripe)
}

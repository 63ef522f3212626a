//go:build linux

package netdev

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/gompj/gompj/device"
)

// coalesceSize is the size of the buffers queued small frames are packed into.
const coalesceSize = 64 << 10

// errByeSent is returned for frames handed to a connection after its goodbye.
var errByeSent = errors.New("netdev: connection is closing")

// conn is one TCP connection to a peer. Its write side (fd, queue) is guarded by mu and used by rank goroutines and
// the progress loop; its read side belongs to the progress loop.
//
// One goroutine at a time writes to the socket: whoever holds the write turn (writing), taken under mu, and the
// system call itself runs without mu. A sender that finds the connection idle takes the turn and writes its frame
// straight from its own memory; a sender that finds it taken, or frames already queued, copies its frame to the
// queue and returns at once. Before it gives the turn back the holder writes out whatever was queued meanwhile,
// many frames per writev: frames that arrive while the socket is busy are coalesced instead of waiting in line
// for mu, and the kernel never sees two writers on one socket. A sender's turn stops at a stream, which the loop
// writes (finishTurnLocked). The turn passes without a lost wake-up: the queue is looked at under mu on both sides,
// and a flush asked for while the turn was taken (the loop's EPOLLOUT) is recorded in flushWanted, which the holder
// honours before it lets go.
type conn struct {
	d      *Device
	p      *peer
	id     int32
	stripe int
	lim    limits

	mu          sync.Mutex
	fd          int   // -1 until attached; set and cleared by the loop
	dead        error // no more writes
	byeSent     bool
	dialing     bool // a dial for this slot is under way (lazy mode)
	writing     bool // a goroutine holds the write turn
	flushWanted bool // a flush was asked for while the turn was taken
	blocked     bool // the socket said EAGAIN: the loop flushes on EPOLLOUT
	closeFd     int  // a descriptor closeConn left for the turn's holder to close (-1: none)
	q           outq
	completed   []*rdvSend // streams fully written, to complete once mu is released
	spare       []*rdvSend // the last completed list, given back once its streams are finished (finishStreams)
	flushF      func()     // d.flushConn(c), made once: what a sender's turn that stops at a stream posts

	// The turn holder's: iovecs of queued frames and of segmented payloads, and a segmented frame's header.
	whdr   [HeaderSize]byte
	iov    [maxIov]unix.Iovec
	iovv   *[device.IovMax]unix.Iovec // segmented writes (segments.go), made on first use
	pieces *[device.IovMax][]byte

	// Owned by the progress loop.
	rx         rx
	registered bool
	byeRecv    bool
	closed     bool
	cur        *device.Inbound
	claim      device.Completer // the receive an eager payload being read goes into (see EagerClaimer)
	curRecv    *rdvRecv
	rts        device.Header              // the RTS being delivered (payload, KindRTS)
	riov       *[device.IovMax]unix.Iovec // segmented direct reads (segments.go), made on first use
	rpieces    *[device.IovMax][]byte
}

func (d *Device) newConn(p *peer, stripe int) *conn {
	c := &conn{d: d, p: p, stripe: stripe, fd: -1, closeFd: -1}
	c.flushF = func() { d.flushConn(c) }
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

// pushFront puts s before everything queued: the unwritten rest of a frame whose start is in the socket.
func (q *outq) pushFront(s seg) {
	if q.head > 0 {
		q.head--
		q.segs[q.head] = s
		return
	}
	q.segs = append(q.segs, seg{})
	copy(q.segs[1:], q.segs)
	q.segs[0] = s
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

// send writes one frame: straight from the caller's memory when the connection is idle, else copied to the queue
// for the holder of the write turn, or for the progress loop (the connection is not up yet, or the socket is full).
func (c *conn) send(h *device.Header, payload device.Payload) error {
	var hdr [HeaderSize]byte
	c.mu.Lock()
	if c.dead != nil {
		err := c.dead
		c.mu.Unlock()
		return err
	}
	if c.byeSent {
		c.mu.Unlock()
		return &PeerError{Node: c.p.id, Addr: c.p.addr, Kind: ErrPeerClosed, Err: errByeSent}
	}
	putHeader(hdr[:], h, c.p.takeOwed())
	if c.fd < 0 || c.writing || !c.q.empty() {
		c.queueLocked(hdr[:], payload)
		c.mu.Unlock()
		return nil
	}
	c.writing = true
	fd := c.fd
	c.mu.Unlock()
	var n int
	var err error
	if payload.Segmented() {
		c.whdr = hdr // the gathered iovec is the connection's: the header it points to must be too
		n, err = c.writeDirectv(fd, c.whdr[:], payload)
	} else {
		n, err = writeFrame(fd, hdr[:], payload.Bytes)
	}
	if hook := afterDirectWrite.Load(); hook != nil {
		(*hook)(c)
	}
	c.mu.Lock()
	if err != nil && err != unix.EAGAIN {
		werr := c.failLocked(err)
		c.releaseLocked()
		c.mu.Unlock()
		return werr
	}
	if total := HeaderSize + payload.Size(); n < total && c.fd == fd {
		// The socket is full: the rest goes first in the queue, before anything queued meanwhile.
		rest := c.d.bufs.get(total - n)
		if n < HeaderSize {
			*rest = append(*rest, hdr[n:]...)
			n = HeaderSize
		}
		k := len(*rest)
		*rest = (*rest)[:k+total-n]
		payload.Gather(n-HeaderSize, (*rest)[k:])
		c.q.pushFront(seg{buf: rest})
		c.blocked = true
	}
	done := c.finishTurnLocked(true)
	c.mu.Unlock()
	c.d.finishStreams(c, done)
	return nil
}

// afterDirectWrite, set only by tests, runs between a sender's direct write and its taking mu again: where other
// senders' frames get queued behind a write that stopped part way.
var afterDirectWrite atomic.Pointer[func(c *conn)]

// queueLocked copies a frame to the queue (and, in lazy mode, starts the dial of a connection not yet up).
func (c *conn) queueLocked(hdr []byte, payload device.Payload) {
	c.appendCopy(hdr)
	c.appendPayload(payload, 0)
	if c.fd < 0 && c.d.cfg.Lazy && !c.dialing {
		c.dialing = true
		p, s := c.p, c.stripe
		c.d.spawn(func() { c.d.dial(p, s) })
	}
}

// finishTurnLocked ends a holder's turn: it writes out what was queued meanwhile (unless the socket is full, when
// EPOLLOUT will bring the loop), honours flushes asked for during the turn, then lets go. It returns the streams
// fully written, to complete once mu is released.
//
// A sender's turn (sender: a rank's or a worker's send, not the loop's or a driving rank's flush) stops at the first
// stream in the queue and posts the rest to the loop: a send returns once its own frame and the small frames queued
// before the stream are out, instead of writing another message's megabyte. A nonblocking collective's start, whose
// RTS took the turn just as the loop queued the stream of the peer's CTS, had written the stream itself: its start
// took as long as the whole transfer, which no computation overlaps (traced over TCP, 1 MiB Ialltoall between 2 node
// processes: one start of 1.8 ms).
func (c *conn) finishTurnLocked(sender bool) []*rdvSend {
	for {
		if !c.blocked && c.dead == nil && c.fd >= 0 {
			if err := c.flushLocked(!sender); err != nil {
				c.failLocked(err)
			}
		}
		if !c.flushWanted || c.dead != nil || c.fd < 0 {
			break
		}
		c.flushWanted, c.blocked = false, false // EPOLLOUT came during the turn: the socket has room again
	}
	c.releaseLocked()
	if sender && !c.q.empty() && !c.blocked && c.dead == nil && c.fd >= 0 {
		c.d.post(c.flushF) // a stream is next: the loop's
	}
	var done []*rdvSend
	if len(c.completed) > 0 { // else the list stays, with its room, for the next turn
		done = c.completed
		c.completed, c.spare = c.spare, nil
	}
	if c.byeSent && c.q.empty() && c.dead == nil {
		// The goodbye went out on this turn: the loop closes the connection once the peer's has come too.
		d := c.d
		d.post(func() { d.flushConn(c) })
	}
	return done
}

// releaseLocked gives the write turn back, closing the descriptor if closeConn left it to the holder.
func (c *conn) releaseLocked() {
	c.writing = false
	c.flushWanted = false
	if c.closeFd >= 0 {
		unix.Close(c.closeFd)
		c.closeFd = -1
	}
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

// writeFrame writes header a and payload b with one writev (more if the socket takes them piecemeal) until done or
// the socket is full. Its iovec lives on the caller's stack: the frame is written without being copied and
// without the connection's mutex.
func writeFrame(fd int, a, b []byte) (int, error) {
	// The iovec is filled field by field, not through setIov, so that escape analysis sees the header stay on the
	// stack: the kernel reads it during the system call, while the goroutine's stack cannot move.
	var iov [2]unix.Iovec
	total := len(a) + len(b)
	done := 0
	for done < total {
		k := 0
		if done < len(a) {
			iov[0].Base = &a[done]
			iov[0].SetLen(len(a) - done)
			k = 1
			if len(b) > 0 {
				iov[1].Base = &b[0]
				iov[1].SetLen(len(b))
				k = 2
			}
		} else {
			iov[0].Base = &b[done-len(a)]
			iov[0].SetLen(total - done)
			k = 1
		}
		n, err := writev(fd, iov[:k])
		if err != nil {
			return done, err
		}
		done += n
	}
	return done, nil
}

// flushLocked writes queued frames until the queue is empty or the socket is full, many per writev, or, without
// streams, until a stream is next. Called by the holder of the write turn, with mu held; it releases mu during each
// system call, so that senders queue their frames meanwhile (the next writev takes them too). Streams fully written
// are collected in c.completed.
func (c *conn) flushLocked(streams bool) error {
	fd := c.fd
	for !c.q.empty() {
		if !streams && c.q.segs[c.q.head].rdv != nil {
			return nil
		}
		var iov []unix.Iovec
		if r := c.q.segs[c.q.head].rdv; r != nil && r.payload.Segmented() {
			iov = c.streamIov(r) // a segmented stream's write is its own (segments.go)
		} else {
			k := 0
			for i := c.q.head; i < len(c.q.segs) && k < maxIov-2; i++ {
				s := &c.q.segs[i]
				if r := s.rdv; r != nil {
					if !streams {
						break // the loop's
					}
					if r.payload.Segmented() {
						break // next round, alone
					}
					if !r.inChunk {
						c.beginChunk(r)
					}
					if r.hoff < HeaderSize {
						setIov(&c.iov[k], r.hdr[r.hoff:])
						k++
					}
					setIov(&c.iov[k], r.payload.Bytes[r.sent:r.chunkEnd])
					k++
					break
				}
				setIov(&c.iov[k], (*s.buf)[s.off:])
				k++
			}
			iov = c.iov[:k]
		}
		c.mu.Unlock()
		n, err := writev(fd, iov)
		c.mu.Lock()
		if c.fd != fd || c.dead != nil {
			return nil // closed or failed meanwhile: the queue was dropped with it
		}
		if err == unix.EAGAIN {
			c.blocked = true
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
	r.chunkEnd = min(r.payload.Size(), r.sent+c.d.cfg.ChunkSize)
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
			if r.sent == r.payload.Size() {
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
	if c.p.owed.Load() < c.d.batch {
		return
	}
	h := nodeHeader(kindCredit)
	c.send(&h, device.Payload{}) // an error is the connection's failure, which the loop reports
}

// queueBye queues the goodbye behind everything already queued; the caller (the loop) flushes.
func (c *conn) queueBye() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead != nil || c.byeSent {
		return
	}
	var hdr [HeaderSize]byte
	h := nodeHeader(kindBye)
	putHeader(hdr[:], &h, 0)
	c.appendCopy(hdr[:])
	c.byeSent = true
}

func (c *conn) String() string {
	return fmt.Sprintf("connection %d to node %d (%s) stripe %d", c.id, c.p.id, c.p.addr, c.stripe)
}

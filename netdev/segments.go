//go:build linux

package netdev

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gompj/gompj/device"
)

// Segmented payloads (device.Segmented): a strided view's blocks go out with writev, at most device.IovMax pieces a
// call, and DATA is read straight into the receiver's pieces with readv. But the kernel pays for every piece of an
// iovec (some tens of nanoseconds each on loopback TCP), so tiny pieces cost more that way than packing them: a
// payload whose pieces average under stageBelow bytes is packed instead, through a staging buffer of stageSize
// bytes filled just before each write (so the packed bytes are still in cache when the kernel copies them), and on
// the receiving side it is read through the connection's read buffer and scattered from there. Whether a payload
// is tiny is judged from its first stageSample pieces.

const (
	stageBelow  = 512
	stageSize   = 64 << 10
	stageSample = 64
)

// tiny reports whether the pieces of bytes [off, off+n) of p average under stageBelow bytes (judged on the first
// stageSample of them).
func tiny(p device.Payload, off, n int) bool {
	if !p.Segmented() {
		return false
	}
	mean, k := p.MeanPiece(off, n, stageSample)
	return k > 0 && mean < stageBelow
}

// bigIov returns the connection's iovec array for segmented writes (made on first use); it is the write turn's.
func (c *conn) bigIov() (*[device.IovMax]unix.Iovec, *[device.IovMax][]byte) {
	if c.iovv == nil {
		c.iovv = new([device.IovMax]unix.Iovec)
		c.pieces = new([device.IovMax][]byte)
	}
	return c.iovv, c.pieces
}

// streamIov gathers the next write of a segmented stream: the rest of its chunk's header, then its pieces up to
// the chunk's end (at most device.IovMax in all), or the staged (packed) bytes. By the turn's holder, under c.mu.
func (c *conn) streamIov(r *rdvSend) []unix.Iovec {
	if !r.inChunk {
		c.beginChunk(r)
	}
	iov, pieces := c.bigIov()
	k := 0
	if r.hoff < HeaderSize {
		setIov(&iov[k], r.hdr[r.hoff:])
		k++
	}
	if r.sent == r.chunkEnd {
		return iov[:k]
	}
	if !r.decided {
		r.decided = true
		r.staged = tiny(r.payload, r.sent, r.payload.Size()-r.sent)
	}
	if r.staged {
		if r.stage == nil {
			r.stage = c.d.bufs.get(stageSize)
		}
		if r.sent < r.stageOff || r.sent >= r.stageEnd {
			r.stageOff, r.stageEnd = r.sent, min(r.chunkEnd, r.sent+stageSize)
			r.payload.Gather(r.stageOff, (*r.stage)[:r.stageEnd-r.stageOff])
		}
		setIov(&iov[k], (*r.stage)[r.sent-r.stageOff:r.stageEnd-r.stageOff])
		return iov[:k+1]
	}
	n := r.payload.Segs.Pieces(r.payload.Off+r.sent, r.chunkEnd-r.sent, pieces[:device.IovMax-k])
	for _, b := range pieces[:n] {
		setIov(&iov[k], b)
		k++
	}
	return iov[:k]
}

// releaseStage returns a finished stream's staging buffer.
func (d *Device) releaseStage(r *rdvSend) {
	if r.stage != nil {
		*r.stage = (*r.stage)[:0]
		d.bufs.put(r.stage)
		r.stage = nil
	}
}

// writeDirectv writes header a then the payload's pieces to fd until done or the socket is full; it returns the
// bytes written. By the holder of the write turn.
func (c *conn) writeDirectv(fd int, a []byte, p device.Payload) (int, error) {
	iov, pieces := c.bigIov()
	total := len(a) + p.Len
	done := 0
	for done < total {
		k := 0
		if done < len(a) {
			setIov(&iov[k], a[done:])
			k++
		}
		if off := max(done-len(a), 0); off < p.Len {
			n := p.Segs.Pieces(p.Off+off, p.Len-off, pieces[:device.IovMax-k])
			for _, b := range pieces[:n] {
				setIov(&iov[k], b)
				k++
			}
		}
		n, err := writev(fd, iov[:k])
		if err != nil {
			return done, err
		}
		done += n
		if n == 0 {
			return done, unix.EAGAIN
		}
	}
	return done, nil
}

// appendPayload queues a copy of the payload's bytes from off, packing them into coalescing buffers.
func (c *conn) appendPayload(p device.Payload, off int) {
	if !p.Segmented() {
		c.appendCopy(p.Bytes[off:])
		return
	}
	n := p.Len - off
	if n <= 0 {
		return
	}
	buf := c.d.bufs.get(max(n, coalesceSize))
	start := len(*buf)
	*buf = (*buf)[:start+n]
	p.Gather(off, (*buf)[start:])
	c.q.push(seg{buf: buf})
}

// readv reads into the gathered buffers, retrying on EINTR (a raw system call, as readFd).
func readv(fd int, iov []unix.Iovec) (int, error) {
	for {
		n, _, e := unix.RawSyscall(unix.SYS_READV, uintptr(fd), uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(n), nil
	}
}

// readPieces reads into the pieces of t (at most device.IovMax of them) with one readv; it returns the bytes read
// and the bytes asked for (less than t.Len when the pieces were capped). Loop only: the read side has iovec arrays
// of its own.
func (c *conn) readPieces(t device.Payload) (n, asked int, err error) {
	if c.riov == nil {
		c.riov = new([device.IovMax]unix.Iovec)
		c.rpieces = new([device.IovMax][]byte)
	}
	k := t.Segs.Pieces(t.Off, t.Len, c.rpieces[:])
	for i, b := range c.rpieces[:k] {
		setIov(&c.riov[i], b)
		asked += len(b)
	}
	n, err = readv(c.fd, c.riov[:k])
	return n, asked, err
}

package rdma

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/internal/mem"
	"github.com/gompj/gompj/internal/pool"
)

// out is a message waiting in a peer's backlog (the provider was busy, or messages ahead of it were): its header,
// finished at transmission (pseq, credit), and a payload the device owns. A stream is the DATA chunks of a cleared
// rendezvous without RMA; an rma entry is a Read or Write to retry.
type out struct {
	h       hdr
	payload []byte
	pooled  *[]byte // payload's buffer, from backlogBufs: back there once the message is out
	stream  *rdvSend
	rma     *rmaOp
}

// backlogBufs holds the buffers of eager payloads copied into a backlog. A window of eager sends that outruns the
// receiver (osu_bw: 64 messages of 32 KiB into a 256 KiB ring) copies most of them there; allocating each copy cost
// 31 us a message at 32 KiB and set off collections that took the cores from the receiver.
var backlogBufs = sync.Pool{New: func() any { return new([]byte) }}

// rdvSend is a rendezvous send, from SendRendezvous (or an eager send that found no credit) until it completes.
type rdvSend struct {
	p       *peer
	h       device.Header // as sent in the RTS
	payload []byte
	size    int     // the payload's bytes
	owned   bool    // payload is the device's copy
	stage   *[]byte // payload's pooled buffer (a payload in pieces, packed: SendRendezvousv)
	// pieces: the payload is segs, which the sender Writes into the receiver's buffer itself (flagPieces)
	pieces bool
	segs   device.Payload
	done   device.Completer
	reg    *regEntry
	pin    pins
	id     uint64 // rma op id of its Writes

	needFin   bool // the receiver Reads our payload: wait for its FIN
	finGot    bool
	writing   int // Writes in flight (a split CTS asked us to Write a part)
	wroteAll  bool
	wantWrite bool
	streaming bool // DATA chunks are being sent
	sent      int
	streamed  bool
	untaken   bool   // the receiver's buffer takes none of a non-empty payload (a truncated receive)
	claim     uint64 // the claim word offered in the RTS (flagClaim), while claimOpen
	claimOpen bool
	ops       opStore // its Write, where one does (splitInto)
}

// rdvRecv is a cleared rendezvous receive, from ClearToSend until it completes.
type rdvRecv struct {
	p    *peer
	h    device.Header // the RTS
	n    int           // the bytes it takes: the message's, or fewer (truncation)
	dst  []byte        // the contiguous buffer the transfer fills (nil: straight into segs)
	segs device.Payload
	// segs is set for a buffer in pieces (ClearToSendv): streamed DATA is scattered into it, direct Reads go into
	// its pieces, or the transfer fills stage (dst), scattered into the pieces once complete.
	direct bool
	stage  *[]byte
	done   device.Completer
	reg    *regEntry
	pin    pins
	id     uint64

	reading   int // Reads in flight
	readAll   bool
	wantRead  bool
	needWDone bool
	wdone     bool
	chunked   bool
	got       int
	// A split under the sender's claim word: once our Reads are in, we claim the word, and if the sender has not
	// taken it (it is not polling), Read the second part too (rest) instead of waiting for its Write.
	claim        uint64
	claimPending bool
	rest         []*rmaOp
	ops          opStore // its Reads, where two do (splitInto)
}

// opStore holds the Reads or Writes of one rendezvous in its record, where they are few: a rendezvous over shared
// memory is one Read (or a Read and the second part's Read or Write when split), which had been an allocation of
// the op and of its slice each.
type opStore struct {
	op  [2]rmaOp
	ptr [2]*rmaOp
}

// splitInto is splitRMA into slot i of st when the transfer is one piece, else splitRMA's own slice.
func (d *Device) splitInto(st *opStore, i int, write bool, local []byte, mr MR, raddr, rkey, ctx uint64) []*rmaOp {
	if d.caps.MaxRMA > 0 && len(local) > d.caps.MaxRMA || len(local) == 0 {
		return d.splitRMA(write, local, mr, raddr, rkey, ctx)
	}
	st.op[i] = rmaOp{write: write, local: local, mr: mr, raddr: raddr, rkey: rkey, ctx: ctx}
	st.ptr[i] = &st.op[i]
	return st.ptr[i : i+1 : i+1]
}

// sendPool and recvPool hold the records of rendezvous transfers that completed well, for the next ones: a
// rendezvous allocates nothing at steady state (a persistent collective's Start and Wait, AllocsPerRun). A record
// goes back once it is completed (finishSend, finishRecv), which happens under pollMu as every event of a transfer
// is handled, so no other handler still holds it; by then its maps, its op id and its backlog entries have let go
// of it. Those that fail (a lost peer, a refused post) are left to the collector.
var (
	sendPool pool.Of[rdvSend]
	recvPool pool.Of[rdvRecv]
)

// rmaOp is a Read or Write to issue (or retry): a part of a rendezvous.
type rmaOp struct {
	write  bool
	local  []byte
	locals [][]byte // a vectored Read or Write (VectorRMA) into or from these, instead of local
	mr     MR
	raddr  uint64
	rkey   uint64
	ctx    uint64
}

// SendEager implements device.Device.
func (d *Device) SendEager(h *device.Header, payload []byte, done device.Completer) error {
	if d.closing.Load() {
		return device.ErrClosed
	}
	if h == nil {
		return errors.New("rdma: nil header")
	}
	if err := d.checkSource(h.Source); err != nil {
		return err
	}
	p, err := d.peerOf(h.Dest, "destination")
	if err != nil {
		return err
	}
	if len(payload) > p.eagerMax {
		return fmt.Errorf("rdma: eager payload of %d bytes over the limit %d", len(payload), p.eagerMax)
	}
	sync := h.Flags&device.FlagSync != 0 && done != nil
	if !p.takeCredit() {
		// The last credit went to another sender since EagerLimit said yes: the message goes by rendezvous, from a
		// copy (so that the caller may reuse its buffer now), and needs no credit.
		cp := make([]byte, len(payload))
		mem.Copy(cp, payload)
		rh := *h
		var rdone device.Completer
		if sync {
			rdone = done
		}
		if err := d.rendezvous(p, &rh, cp, true, nil, rdone); err != nil {
			return err
		}
		if !sync && done != nil {
			done.Complete(nil)
		}
		return nil
	}
	hh := hdr{Header: *h}
	hh.Kind = device.KindEager
	hh.Flags &= device.FlagSync
	hh.Length = uint64(len(payload))
	hh.Seq = 0 // a standard eager message is never answered: no id (and no shared counter to bump)
	if sync {
		hh.Seq = d.seq.Add(1)
	}
	p.mu.Lock()
	if p.err != nil {
		err := p.err
		p.mu.Unlock()
		p.credit.Add(1)
		return err
	}
	if sync {
		p.syncWait[hh.Seq] = &syncEntry{h: hh.Header, done: done}
		d.inflight.Add(1)
	}
	err = d.sendLocked(p, &hh, payload, true)
	if err != nil && sync {
		delete(p.syncWait, hh.Seq)
		d.inflight.Add(-1)
	}
	p.mu.Unlock()
	if err != nil {
		p.credit.Add(1)
		return err
	}
	if !sync && done != nil {
		done.Complete(nil)
	}
	return nil
}

// takeCredit takes an eager credit toward p, if one is left.
func (p *peer) takeCredit() bool {
	for {
		c := p.credit.Load()
		if c <= 0 {
			return false
		}
		if p.credit.CompareAndSwap(c, c-1) {
			return true
		}
	}
}

// SendRendezvous implements device.Device.
func (d *Device) SendRendezvous(h *device.Header, payload []byte, done device.Completer) error {
	if d.closing.Load() {
		return device.ErrClosed
	}
	if h == nil {
		return errors.New("rdma: nil header")
	}
	if uint64(len(payload)) > d.cfg.MaxMessage {
		return fmt.Errorf("rdma: message of %d bytes over the limit %d", len(payload), d.cfg.MaxMessage)
	}
	if err := d.checkSource(h.Source); err != nil {
		return err
	}
	p, err := d.peerOf(h.Dest, "destination")
	if err != nil {
		return err
	}
	return d.rendezvous(p, h, payload, false, nil, done)
}

// rendezvous sends the RTS of a rendezvous send. A payload longer than an eager message is registered, which
// also proves it is heap memory; with RMA toward the peer the RTS carries its address and key. A payload that is
// not heap memory is copied first (the caller is the sending goroutine, so reading it here is safe).
func (d *Device) rendezvous(p *peer, h *device.Header, payload []byte, owned bool, stage *[]byte, done device.Completer) error {
	s := sendPool.Get()
	s.p, s.h, s.payload, s.size, s.owned, s.stage, s.done = p, *h, payload, len(payload), owned || stage != nil, stage, done
	s.h.Kind = device.KindRTS
	s.h.Flags &= device.FlagSync
	s.h.Length = uint64(len(payload))
	s.h.Seq = d.seq.Add(1)
	rh := hdr{Header: s.h}
	if len(payload) > p.eagerMax || (len(payload) > 0 && !s.owned) {
		reg := payload
		if stage != nil {
			reg = (*stage)[:cap(*stage)] // the whole pooled buffer: registered once, whatever the length
		}
		e, err := d.cache.get(reg, regAccess)
		if errors.Is(err, ErrNotHeap) && !owned {
			cp := make([]byte, len(payload))
			mem.Copy(cp, payload)
			s.payload, s.owned = cp, true
			e, err = d.cache.get(cp, regAccess)
		}
		if err != nil {
			s.release(d)
			return fmt.Errorf("rdma: registering a %d-byte payload for node %d: %w", len(payload), p.id, err)
		}
		s.reg = e
		s.pin.Pin(&s.payload[0])
		if (p.rma.Load() || p.lent.Load() && isLent(s.payload)) && len(payload) > p.eagerMax {
			rh.Flags |= flagRMA
			rh.raddr = e.mr.Addr(unsafePtr(s.payload))
			rh.rkey = e.mr.Key()
			s.needFin = true
			if d.splitter != nil && len(payload) >= d.cfg.SplitMin {
				if tok, ok := d.splitter.OpenClaim(); ok {
					rh.Flags |= flagClaim
					rh.offset = tok
					s.claim, s.claimOpen = tok, true
				}
			}
		}
	}
	return d.sendRTS(p, s, &rh)
}

// sendRTS records the rendezvous send s and sends its RTS rh.
func (d *Device) sendRTS(p *peer, s *rdvSend, rh *hdr) error {
	p.mu.Lock()
	if p.err != nil {
		err := p.err
		p.mu.Unlock()
		s.release(d)
		return err
	}
	p.rdvSend[s.h.Seq] = s
	d.inflight.Add(1)
	err := d.sendLocked(p, rh, nil, false)
	if err != nil {
		delete(p.rdvSend, s.h.Seq)
		d.inflight.Add(-1)
	}
	p.mu.Unlock()
	if err != nil {
		s.release(d)
	}
	return err
}

func (s *rdvSend) release(d *Device) {
	if s.claimOpen {
		s.claimOpen = false
		d.splitter.CloseClaim(s.claim)
	}
	s.pin.Unpin()
	d.cache.put(s.reg)
	s.reg = nil
	if s.stage != nil {
		putStage(s.stage)
		s.stage, s.payload = nil, nil
	}
}

// release lets go of the receive's memory. A staging buffer goes back to its pool: the caller has scattered it
// into the pieces already, or the transfer failed.
func (r *rdvRecv) release(d *Device) {
	r.pin.Unpin()
	d.cache.put(r.reg)
	r.reg = nil
	if r.stage != nil {
		putStage(r.stage)
		r.stage, r.dst = nil, nil
	}
}

// ClearToSend implements device.Device. With RMA the receiver Reads the payload (all of it, or the first part
// while the sender Writes the rest, on shared memory); without, the sender streams DATA messages.
func (d *Device) ClearToSend(rts *device.Header, dst []byte, done device.Completer) error {
	return d.clearToSend(rts, device.Contiguous(dst), done)
}

// clearToSend is ClearToSend into dst, contiguous or in pieces (ClearToSendv). Pieces are filled in one of three
// ways: streamed DATA is scattered into them; large pieces are Read into directly; tiny ones (or any, on a
// provider that wants local buffers registered) go through a staging buffer, which the Reads fill and which is
// scattered into the pieces at the end.
func (d *Device) clearToSend(rts *device.Header, dst device.Payload, done device.Completer) error {
	if d.closing.Load() {
		return device.ErrClosed
	}
	if rts == nil || rts.Kind != device.KindRTS {
		return errors.New("rdma: ClearToSend needs the RTS header delivered by the device")
	}
	n := dst.Size()
	if n < 0 || uint64(n) > rts.Length {
		return fmt.Errorf("rdma: receive buffer of %d bytes for a message of %d", n, rts.Length)
	}
	p, err := d.peerOf(rts.Source, "source")
	if err != nil {
		return err
	}
	p.mu.Lock()
	info, ok := p.rtsIn[rts.Seq]
	if !ok || !sameMessage(&info.Header, rts) {
		p.mu.Unlock()
		return fmt.Errorf("rdma: ClearToSend for message %d from node %d, which the device did not deliver (or cleared already)", rts.Seq, p.id)
	}
	delete(p.rtsIn, rts.Seq)
	p.mu.Unlock()

	r := recvPool.Get()
	r.p, r.h, r.n, r.done = p, info.Header, n, done
	// Without RMA toward the peer, a payload it lent is still Read (LentRMA): plainly, with nothing Written into our
	// buffer unless that is lent too.
	anyRMA := p.rma.Load()
	rma := info.Flags&flagRMA != 0 && (anyRMA || p.lent.Load())
	buf := dst.Bytes                     // the contiguous buffer the transfer fills: the receive's own, or a staging buffer
	pieces := info.Flags&flagPieces != 0 // the sender Writes the payload into our buffer (only ever with RMA)
	if dst.Segmented() && n > 0 {
		r.segs = dst
		switch {
		case pieces:
			// The sender Writes into one contiguous buffer: ours to scatter.
			r.stage = getStage(n)
			buf = (*r.stage)[:n]
		case !rma:
			// Streamed DATA is scattered straight into the pieces.
		case !d.caps.LocalMR && !d.tinyPieces(dst) && anyRMA:
			r.direct = true
		default:
			r.stage = getStage(n)
			buf = (*r.stage)[:n]
		}
	}
	var e *regEntry
	if len(buf) > 0 {
		reg := buf
		if r.stage != nil {
			reg = (*r.stage)[:cap(*r.stage)] // the whole pooled buffer: registered once, whatever the length
		}
		e, err = d.cache.get(reg, regAccess)
		if err != nil {
			r.release(d)
			return fmt.Errorf("rdma: registering a %d-byte receive buffer for node %d: %w", len(buf), p.id, err)
		}
		r.reg = e
		r.pin.Pin(&buf[0])
		r.dst = buf
	}
	// The CTS says how much the receiver takes: n, fewer than the message's bytes when its buffer is short
	// (truncation). The sender then Writes or streams only what fits; a receiver that Reads reads only that.
	// Nothing past n is ever received.
	cts := hdr{Header: info.Header}
	cts.Kind = device.KindCTS
	cts.Flags &= device.FlagSync
	cts.Length = uint64(n)
	var reads []*rmaOp
	switch {
	case n == 0:
	case pieces:
		// The sender Writes all it sends into buf, then says WDONE.
		r.needWDone = true
		cts.Flags |= flagRMA
		cts.raddr = e.mr.Addr(unsafePtr(buf))
		cts.rkey = e.mr.Key()
	case rma && r.direct:
		// Straight into the pieces, all of them Read here: a split would need one contiguous buffer.
		r.id = d.opID.Add(1)
		r.wantRead = true
		reads = d.piecesRMA(false, &r.pin, dst, info.raddr, info.rkey, ctxRead|r.id)
		r.reading = len(reads)
	case rma:
		readLen := n
		if info.Flags&flagClaim != 0 && d.splitter != nil && n >= max(d.cfg.SplitMin, 128) && (anyRMA || isLent(buf)) {
			readLen = (n / 2) &^ 63
		}
		r.id = d.opID.Add(1)
		if readLen < n {
			r.needWDone = true
			cts.Flags |= flagRMA
			cts.raddr = e.mr.Addr(unsafePtr(buf[readLen:]))
			cts.rkey = e.mr.Key()
			cts.offset = uint64(readLen)
			r.claim, r.claimPending = info.offset, true
			r.rest = d.splitInto(&r.ops, 1, false, buf[readLen:n], e.mr, info.raddr+uint64(readLen), info.rkey, ctxRead|r.id)
		}
		r.wantRead = true
		reads = d.splitInto(&r.ops, 0, false, buf[:readLen], e.mr, info.raddr, info.rkey, ctxRead|r.id)
		r.reading = len(reads)
	default:
		r.chunked = true
	}
	p.mu.Lock()
	if p.err != nil {
		err := p.err
		p.mu.Unlock()
		r.release(d)
		return err
	}
	if n > 0 {
		p.rdvRecv[info.Seq] = r
		d.inflight.Add(1)
		if r.wantRead {
			d.ops.Store(r.id, r)
		}
	}
	// The CTS goes first, so that a sender that Writes its part starts while we Read ours. A message the receiver
	// reads alone needs no CTS: the FIN answers the RTS.
	if !r.wantRead || r.needWDone {
		err = d.sendLocked(p, &cts, nil, false)
	}
	if err != nil {
		delete(p.rdvRecv, info.Seq)
		d.inflight.Add(-1)
		d.ops.Delete(r.id)
	}
	p.mu.Unlock()
	if err != nil {
		r.release(d)
		return err
	}
	// The Reads go outside the lock: on shared memory they copy right here.
	d.issueAll(p, reads)
	if n == 0 && done != nil {
		done.Complete(nil)
	}
	return nil
}

// issueAll issues Reads or Writes of a rendezvous: at once, or queued while the provider is busy. A final error is
// reported as the failed completion of the operation, for the poller to handle.
func (d *Device) issueAll(p *peer, ops []*rmaOp) {
	for i, op := range ops {
		err := d.issue(p, op)
		if err == ErrAgain {
			p.mu.Lock()
			for _, o := range ops[i:] {
				d.queue(p, &out{rma: o})
			}
			p.mu.Unlock()
			return
		}
		if err != nil {
			kind := OpRead
			if op.write {
				kind = OpWrite
			}
			d.localCompletion(Completion{Op: kind, Ctx: op.ctx, Node: p.id, Err: err})
		}
	}
}

// splitRMA cuts a Read or Write into pieces the provider takes.
func (d *Device) splitRMA(write bool, local []byte, mr MR, raddr, rkey, ctx uint64) []*rmaOp {
	step := len(local)
	if d.caps.MaxRMA > 0 && step > d.caps.MaxRMA {
		step = d.caps.MaxRMA
	}
	var ops []*rmaOp
	for off := 0; off < len(local); off += step {
		n := min(step, len(local)-off)
		ops = append(ops, &rmaOp{write: write, local: local[off : off+n], mr: mr, raddr: raddr + uint64(off), rkey: rkey, ctx: ctx})
	}
	return ops
}

func sameMessage(a, b *device.Header) bool {
	return a.Source == b.Source && a.Dest == b.Dest && a.Context == b.Context && a.Tag == b.Tag && a.Seq == b.Seq &&
		a.Length == b.Length
}

// Ack implements device.Device.
func (d *Device) Ack(h *device.Header) error {
	if d.closing.Load() {
		return device.ErrClosed
	}
	if h == nil || h.Kind != device.KindEager || h.Flags&device.FlagSync == 0 {
		return errors.New("rdma: Ack needs the header of a synchronous eager message")
	}
	p, err := d.peerOf(h.Source, "source")
	if err != nil {
		return err
	}
	a := hdr{Header: *h}
	a.Kind = device.KindAck
	a.Flags = device.FlagSync
	return d.send(p, &a, nil)
}

// EagerLimit implements device.Device: the eager limit toward dest's node while a credit is left, else 0.
func (d *Device) EagerLimit(dest int) int {
	if dest < 0 || dest >= d.ranks {
		return 0
	}
	n := int(d.rankNode[dest])
	if n == d.self {
		return d.cfg.EagerLimit
	}
	if d.peers == nil || d.peers[n] == nil || d.peers[n].credit.Load() <= 0 {
		return 0
	}
	return d.peers[n].eagerMax
}

// send sends a control message (no payload the caller keeps).
func (d *Device) send(p *peer, h *hdr, payload []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	return d.sendLocked(p, h, payload, true)
}

// sendLocked transmits a message now if nothing waits ahead of it, else (or if the provider is busy) queues it,
// with a copy of its payload when copy is set. Called with p.mu held.
func (d *Device) sendLocked(p *peer, h *hdr, payload []byte, copyPayload bool) error {
	if len(p.backlog) == 0 {
		err := d.transmit(p, h, payload)
		if err != ErrAgain {
			return err
		}
	}
	o := &out{h: *h, payload: payload}
	if copyPayload && len(payload) > 0 {
		o.pooled = backlogBufs.Get().(*[]byte)
		*o.pooled = append((*o.pooled)[:0], payload...)
		o.payload = *o.pooled
	}
	d.queue(p, o)
	return nil
}

func (d *Device) queue(p *peer, o *out) {
	p.backlog = append(p.backlog, o)
	if !p.queued {
		p.queued = true
		d.pending.Add(1)
		d.ep.Wake()
	}
}

// transmit hands one message to the provider: injected if it fits, else through a bounce buffer. It finishes the
// header (order number, returned credit). Called with p.mu held.
func (d *Device) transmit(p *peer, h *hdr, payload []byte) error {
	h.pseq = p.pseqOut
	h.credit = 0
	if p.owed.Load() != 0 {
		h.credit = uint32(p.owed.Swap(0))
	}
	n := h.size() + len(payload)
	var err error
	if n <= d.caps.InjectSize {
		hs := h.put(p.hbuf[:])
		err = d.ep.Inject(p.id, p.hbuf[:hs], payload)
	} else if b := d.tx.get(); b == nil {
		err = ErrAgain
	} else {
		hs := h.put(b.buf)
		copy(b.buf[hs:], payload)
		if err = d.ep.Send(p.id, b.buf[:n], d.tx.sl.mr, ctxSend|uint64(b.idx)); err != nil {
			d.tx.put(ctxSend | uint64(b.idx))
		}
	}
	if err != nil {
		p.owed.Add(int32(h.credit))
		return err
	}
	p.pseqOut++
	return nil
}

func (d *Device) issue(p *peer, op *rmaOp) error {
	if op.locals != nil {
		if op.write {
			return d.vec.Writev(p.id, op.locals, op.raddr, op.rkey, op.ctx)
		}
		return d.vec.Readv(p.id, op.locals, op.raddr, op.rkey, op.ctx)
	}
	if op.write {
		return d.ep.Write(p.id, op.local, op.mr, op.raddr, op.rkey, op.ctx)
	}
	return d.ep.Read(p.id, op.local, op.mr, op.raddr, op.rkey, op.ctx)
}

// flush sends what p's backlog holds, in order, until the provider is busy again. Streams send their DATA chunks
// straight from the sender's payload. It returns the sends that finished streaming, for the caller to complete,
// and a final provider error toward p (the caller fails the peer).
func (d *Device) flush(p *peer, fin []*rdvSend) (_ []*rdvSend, progressed bool, lost error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.backlog) > 0 && p.err == nil {
		o := p.backlog[0]
		var err error
		switch {
		case o.stream != nil:
			s := o.stream
			for s.sent < len(s.payload) {
				n := min(p.chunk, len(s.payload)-s.sent)
				h := hdr{Header: s.h}
				h.Kind = device.KindData
				h.Flags &= device.FlagSync
				h.Length = uint64(n)
				h.offset = uint64(s.sent)
				if err = d.transmit(p, &h, s.payload[s.sent:s.sent+n]); err != nil {
					break
				}
				s.sent += n
				progressed = true
			}
			if err == nil {
				s.streamed = true
				fin = append(fin, s)
			}
		case o.rma != nil:
			err = d.issue(p, o.rma)
		default:
			if err = d.transmit(p, &o.h, o.payload); err == nil && o.pooled != nil {
				backlogBufs.Put(o.pooled) // the provider copied it (Inject), or the bounce buffer holds it
			}
		}
		if err == ErrAgain {
			break
		}
		if err != nil {
			// A final provider error toward the peer: it is unreachable.
			lost = err
			break
		}
		progressed = true
		p.backlog[0] = nil
		p.backlog = p.backlog[1:]
	}
	if len(p.backlog) == 0 && p.queued {
		p.backlog = nil
		p.queued = false
		d.pending.Add(-1)
	}
	return fin, progressed, lost
}

// startStream queues the DATA chunks of a send cleared without RMA. Called with p.mu held.
func (d *Device) startStream(p *peer, s *rdvSend) {
	s.streaming = true
	d.queue(p, &out{stream: s})
}

func unsafePtr(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

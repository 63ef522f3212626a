package rdma

import (
	"fmt"
	"runtime"
	"time"

	"github.com/gompj/gompj/device"
)

// heldMsg is a message that arrived before its turn (unordered providers), copied out of its receive buffer.
type heldMsg struct {
	h       hdr
	payload []byte
}

// maxHeld bounds how far ahead of its turn a message may arrive: more means a peer that lies about its order.
const maxHeld = 1 << 16

// standDownFor is how long a progress goroutine that stands down waits before it looks again
// (device.StandDownFor): the shorter time while sends are under way or held back.
func (d *Device) standDownFor() time.Duration {
	return device.StandDownFor(d.inflight.Load() > 0 || d.pending.Load() > 0)
}

// loop is the progress goroutine: it polls while no rank does, busy for BusyPoll after the last event, then
// sleeps in the endpoint's Wait. On Close it keeps going until nothing is in flight (or CloseTimeout).
func (d *Device) loop() {
	defer close(d.done)
	var deadline time.Time
	// One timer for every stand-down, reset each time: a new one per stand-down was an allocation per wait of a
	// driving rank.
	resume := time.NewTimer(time.Hour)
	resume.Stop()
	for {
		closing := d.closing.Load()
		if closing {
			if deadline.IsZero() {
				deadline = time.Now().Add(d.cfg.CloseTimeout)
			}
			if d.quiet() {
				return
			}
			if time.Now().After(deadline) {
				d.closeErr = fmt.Errorf("rdma: node %d: close timed out after %v with %d transfers in flight", d.self,
					d.cfg.CloseTimeout, d.inflight.Load())
				return
			}
		} else if d.drivers.Load() > 0 {
			// A rank drives the device: stand down until the last driver parks, or look again soon.
			resume.Reset(d.standDownFor())
			select {
			case <-d.kick:
			case <-resume.C:
			case <-d.quit:
			}
			resume.Stop()
			continue
		}
		h := d.helper.Load()
		if h != nil {
			(*h).Round()
		}
		d.pollMu.Lock()
		d.loopHolds.Store(true)
		got := d.pollOnce()
		d.loopHolds.Store(false)
		d.pollMu.Unlock()
		if h != nil {
			(*h).Help()
		}
		now := time.Now()
		if got {
			d.lastActive = now
			continue
		}
		if busy := time.Duration(d.busyPoll.Load()); busy > 0 && now.Sub(d.lastActive) < busy {
			continue
		}
		wait := 100 * time.Millisecond
		if closing || d.pending.Load() > 0 {
			// A busy provider may not wake us when it frees up (libfabric's; shm does, ring.go): look again soon.
			wait = time.Millisecond
		}
		// Enter wakes a blocked loop when it sees blocked; checking drivers after setting it closes the race (both
		// are sequentially consistent atomics). A loop left asleep in the endpoint's Wait while a rank drives is
		// woken by every arriving completion only to find the rank polling: over libfabric's tcp;ofi_rxm, its
		// fi_cq_sread and the rank's fi_cq_read then took turns at the provider's locks at every message.
		d.blocked.Store(true)
		if !closing && d.drivers.Load() > 0 {
			d.blocked.Store(false)
			continue
		}
		d.ep.Wait(wait)
		d.blocked.Store(false)
	}
}

// SetBusyPoll changes how long the progress goroutine polls after the last event before it sleeps (<= 0: it
// sleeps at once), from its next round. A node sets it once it knows how many ranks share the host's cores, which
// it learns after the devices are open: where ranks outnumber cores, a busy-polling loop takes a core from a rank
// that has work (about 5 % of the CPU in NPB CG class A with 4 ranks in 2 node processes on 2 cores, perf samples
// of the loop outside its Wait).
func (d *Device) SetBusyPoll(t time.Duration) { d.busyPoll.Store(int64(t)) }

// SetHelper gives the progress goroutine work to do between its rounds (device.Helper): the node's worker pool's
// tasks that the completions it delivers queue. It may be set at any time.
func (d *Device) SetHelper(h device.Helper) { d.helper.Store(&h) }

// quiet reports whether nothing handed to the device is still in flight.
func (d *Device) quiet() bool {
	return d.inflight.Load() == 0 && d.pending.Load() == 0
}

// Enter implements device.Poller. The first driver wakes the progress goroutine if it sleeps in the endpoint's
// Wait, so that it stands down (loop) instead of being woken by each completion the driver polls for.
func (d *Device) Enter() {
	if d.drivers.Add(1) == 1 && d.blocked.Load() {
		d.ep.Wake()
	}
}

// Leave implements device.Poller.
func (d *Device) Leave(parking bool) {
	if d.drivers.Add(-1) == 0 && parking {
		select {
		case d.kick <- struct{}{}:
		default:
		}
	}
}

// Poll implements device.Poller.
//
// A driving rank's Poll also yields its processor (runtime.Gosched, outside the lock) once yieldAfter has passed
// since the last yield. A rank that drives the device through a stream of short waits never otherwise passes
// through the scheduler, so after 10 ms sysmon takes it for a runaway goroutine: it preempts it, and if the rank
// is in a provider call (cgo) it takes its P away and hands it to another thread, which also sets sysmon polling
// every 20 us again for the next millisecond. On a box whose cores the ranks hold, each of those wake-ups preempts
// a spinning rank. (An ofi ping-pong of 20000 round trips: sysmon's preemptions 254-279 -> 20-31 per node process,
// P hand-offs 94-131 -> 7-9, its wake-ups 1190-2557 -> 198-300.) The clock is read every yieldCheck-th Poll only.
//
// A driving rank whose Polls find nothing idleYieldEvery times in a row (one that finds the device held counts as
// finding nothing) also gives its core away for a moment (device.IdleYield), as netdev's do. Traced between 2 node
// processes of one host (1 MiB Ialltoall, idle computation, 2 vCPUs): a rank back from its computation spun its 1 ms
// window in a barrier while the other process, its loop kicked and its rank in a starting call, waited 1.3 ms for a
// core.
func (d *Device) Poll() bool {
	got, yield := d.pollDriving()
	if yield {
		runtime.Gosched()
	}
	switch {
	case !got && d.loopHolds.Load():
		// The progress goroutine holds the device, most likely moving what this rank waits for (a Read of a
		// megabyte is 70 us of copying under the lock). Give the core away at once: where the two share it (node
		// processes bound to a core each), a rank back from its computation had preempted the loop in the middle
		// of that copy and spun on the lock until its idle yield, 200 us later. 1 MiB Ibcast between 2 node
		// processes of one host with GOMPJ_BIND=cores GOMPJ_OVERLAP=1, idle computation, 4 alternated runs: overlap
		// 0 / 0 / 0 / 0 % before, 68 / 93 / 54 / 47 % after; Iallreduce 82 -> 91 %, Ialltoall 67 -> 86 % (medians);
		// latency and Allreduce, 8 B to 1 MiB, level. Where the loop has a core of its own, the yield returns at
		// once.
		schedYield()
	case d.idle.Polled(got, idleYieldEvery):
		schedYield()
	}
	return got
}

// schedYield is device.SchedYield (Poll); a variable, so that tests count the calls.
var schedYield = device.SchedYield

// idleYieldEvery: a Poll over shared memory takes about 0.1 us (yieldCheck), so a rank yields after some 200 us of
// finding nothing (over libfabric, milliseconds): a wait that a driven collective or a message takes never yields.
// With 256, the waiting rank gave its core away in the middle of driven waits: a 1 MiB Iallreduce's pure time
// between 2 node processes of one host went from 140 to 196 us (5 alternated runs). With 2048 it is level, and 1 MiB
// idle overlap there went from 64 / 81 / 0 % to 90 / 93 / 51 % (Iallreduce / Ialltoall / Ibcast, medians of 15
// alternated runs of gompj bench -np 2 -nodes 2 -compute idle); latency and Allreduce, 8 B and 1 MiB, level.
const idleYieldEvery = 2048

// pollDriving is Poll under the lock: it reports whether it got anything, and whether the caller should yield.
func (d *Device) pollDriving() (got, yield bool) {
	if !d.pollMu.TryLock() {
		return false, false
	}
	defer d.pollMu.Unlock()
	if !d.started || d.closing.Load() {
		return false, false
	}
	got = d.pollOnce()
	if d.polls++; d.polls%yieldCheck == 0 {
		if now := time.Now(); now.Sub(d.lastYield) >= yieldAfter {
			d.lastYield, yield = now, true
		}
	}
	return got, yield
}

const (
	yieldAfter = 2 * time.Millisecond // well within sysmon's 10 ms
	yieldCheck = 256                  // Polls between looks at the clock: 25 us over shared memory, 0.5 ms over libfabric
)

// localCompletion queues a completion the device makes itself.
func (d *Device) localCompletion(c Completion) {
	d.localMu.Lock()
	d.local = append(d.local, c)
	d.hasLoc.Store(true)
	d.localMu.Unlock()
	d.ep.Wake()
}

// pollOnce handles what the completion queue holds and flushes the backlogs. Called with pollMu held.
func (d *Device) pollOnce() bool {
	n, err := d.ep.Poll(d.cq)
	if err != nil {
		for _, p := range d.active {
			d.failPeer(p, &PeerError{Node: p.id, Kind: ErrPeerLost, Err: err}, true)
		}
		return true
	}
	for i := range n {
		d.handle(&d.cq[i])
		d.cq[i] = Completion{}
	}
	got := n > 0 || d.tookInPlace
	d.tookInPlace = false
	if d.hasLoc.Load() {
		d.localMu.Lock()
		loc := d.local
		d.local = nil
		d.hasLoc.Store(false)
		d.localMu.Unlock()
		for i := range loc {
			d.handle(&loc[i])
		}
		got = true
	}
	if d.pending.Load() > 0 {
		var fin []*rdvSend
		for _, p := range d.active {
			if p.failed {
				continue
			}
			f, progressed, lost := d.flush(p, fin[:0])
			got = got || progressed
			for _, s := range f {
				d.finishSend(p, s)
			}
			if lost != nil {
				d.failPeer(p, &PeerError{Node: p.id, Kind: ErrPeerLost, Err: lost}, true)
			}
		}
	}
	return got
}

func (d *Device) peerByNode(n int) *peer {
	if n < 0 || n >= len(d.peers) {
		return nil
	}
	return d.peers[n]
}

// handle processes one completion.
func (d *Device) handle(c *Completion) {
	p := d.peerByNode(c.Node)
	switch c.Op {
	case OpRecv:
		rb := d.rx.get(c.Ctx)
		if rb == nil || c.Len < 0 || c.Len > len(rb.buf) {
			d.fatal(fmt.Errorf("rdma: node %d: the provider completed an unknown receive (ctx %#x, %d bytes)", d.self, c.Ctx, c.Len))
			return
		}
		if c.Err != nil || p == nil || p.failed {
			d.rx.repost(rb)
			if c.Err != nil && p != nil {
				d.failPeer(p, &PeerError{Node: p.id, Kind: ErrPeerLost, Err: c.Err}, true)
			}
			return
		}
		d.received(p, rb, rb.buf[:c.Len])
	case OpSend:
		d.tx.put(c.Ctx)
		if c.Err != nil && p != nil {
			d.failPeer(p, &PeerError{Node: p.id, Kind: ErrPeerLost, Err: c.Err}, true)
		}
	case OpRead, OpWrite:
		d.rmaDone(p, c)
	case OpPeerLost:
		if p != nil {
			err := c.Err
			if err == nil {
				err = fmt.Errorf("the provider lost it")
			}
			d.failPeer(p, &PeerError{Node: p.id, Kind: ErrPeerLost, Err: err}, true)
		}
	case OpPeerClosed:
		if p != nil {
			d.failPeer(p, &PeerError{Node: p.id, Kind: ErrPeerClosed, Err: fmt.Errorf("it closed its device")}, false)
		}
	}
}

// takeInPlace is the device's offer to an endpoint that shows messages where they lie (InPlacer): an eager
// message that a posted receive claims at its header (device.EagerClaimer) is copied from there straight into
// that receive's buffer, and its credit is owed back at once. Anything else (another kind, no such receive, a
// header that fails its checks) is left to the usual path, which decodes it again and reports what is wrong.
// Called by the poller (pollMu), from the endpoint's Poll; only for ordered endpoints (see received).
func (d *Device) takeInPlace(node int, m []byte) bool {
	p := d.peerByNode(node)
	if p == nil || p.failed {
		return false
	}
	h, payload, err := decode(m, &p.lim)
	if err != nil || h.Kind != device.KindEager || h.credit > uint32(p.grant) {
		return false
	}
	if !d.claim(&h, payload) {
		return false
	}
	d.tookInPlace = true
	p.pseqIn++
	if h.credit > 0 && p.credit.Add(int32(h.credit)) > p.grant {
		d.failPeer(p, &PeerError{Node: p.id, Kind: ErrPeerLost, Err: badf(p.id, "returned %d credits, more than it was granted", h.credit)}, true)
		return true
	}
	d.owe(p)
	return true
}

// claim offers the eager message h to the sink (device.EagerClaimer): if a posted receive takes it, the payload is
// copied into that receive's buffer and the receive completed. The header goes by way of the device's own copy:
// h, behind an interface call, would escape (an allocation per message). Only the poller calls it (pollMu), and no
// sink keeps the header.
func (d *Device) claim(h *hdr, payload []byte) bool {
	if d.claimer == nil {
		return false
	}
	d.claimHdr = h.Header
	dst, done, ok := d.claimer.ClaimEager(&d.claimHdr)
	if !ok {
		return false
	}
	if len(payload) > 0 {
		dst.Scatter(0, payload) // a copy, or into a View's blocks
	}
	done.Complete(nil)
	return true
}

// fatal: the provider itself misbehaves; every peer is lost.
func (d *Device) fatal(err error) {
	for _, p := range d.active {
		d.failPeer(p, &PeerError{Node: p.id, Kind: ErrPeerLost, Err: err}, true)
	}
}

// received decodes a message in receive buffer rb and acts on it, in the peer's order.
func (d *Device) received(p *peer, rb *rxBuf, m []byte) {
	h, payload, err := decode(m, &p.lim)
	if err != nil {
		d.rx.repost(rb)
		d.failPeer(p, &PeerError{Node: p.id, Kind: ErrPeerLost, Err: err}, true)
		return
	}
	if !d.caps.Ordered && h.pseq != p.pseqIn {
		if ahead := h.pseq - p.pseqIn; ahead > maxHeld || p.held[h.pseq].h.Kind != 0 {
			d.rx.repost(rb)
			d.failPeer(p, &PeerError{Node: p.id, Kind: ErrPeerLost, Err: badf(p.id, "message number %d while expecting %d", h.pseq, p.pseqIn)}, true)
			return
		}
		p.held[h.pseq] = heldMsg{h: h, payload: append([]byte(nil), payload...)}
		d.rx.repost(rb)
		return
	}
	p.pseqIn++
	d.process(p, &h, payload, rb)
	for !p.failed {
		m, ok := p.held[p.pseqIn]
		if !ok {
			break
		}
		delete(p.held, p.pseqIn)
		p.pseqIn++
		d.process(p, &m.h, m.payload, nil)
	}
}

// process acts on one message in order. rb is its receive buffer, or nil for a held copy.
func (d *Device) process(p *peer, h *hdr, payload []byte, rb *rxBuf) {
	if h.credit > 0 {
		if c := p.credit.Add(int32(h.credit)); c > p.grant || h.credit > uint32(p.grant) {
			if rb != nil {
				d.rx.repost(rb)
			}
			d.failPeer(p, &PeerError{Node: p.id, Kind: ErrPeerLost, Err: badf(p.id, "returned %d credits, more than it was granted", h.credit)}, true)
			return
		}
	}
	if h.Kind == device.KindEager {
		// A receive already posted takes the payload straight from the receive buffer, which goes back to the
		// provider at once: no Inbound for the sink to hold and release, one copy as on the usual path.
		if d.claim(h, payload) {
			if rb != nil {
				d.rx.repost(rb)
			}
			d.owe(p)
			return
		}
		var in *device.Inbound
		if rb != nil {
			rb.peer = p.id
			rb.copied = false
			in = &rb.in
		} else {
			nb := &rxBuf{peer: p.id, copied: true}
			in = &nb.in
		}
		in.Header = h.Header
		in.Payload = payload
		in.Release = d.release
		d.sink.DeliverEager(in)
		return
	}
	if rb != nil {
		// Not before the message is handled: a DATA payload is read from rb below, and once posted again the
		// buffer may take the next message at any time (a provider progresses on other threads too: a send, a
		// Wait).
		defer d.rx.repost(rb)
	}
	switch h.Kind {
	case device.KindRTS:
		p.mu.Lock()
		_, dup := p.rtsIn[h.Seq]
		if !dup && p.err == nil {
			p.rtsIn[h.Seq] = *h
		}
		p.mu.Unlock()
		if dup {
			d.failPeer(p, &PeerError{Node: p.id, Kind: ErrPeerLost, Err: badf(p.id, "RTS %d twice", h.Seq)}, true)
			return
		}
		// The sink keeps a copy (device.Sink): the poller's own header (pollMu) goes behind the interface
		// without an allocation.
		d.rts = h.Header
		d.sink.DeliverRTS(&d.rts)
	case device.KindCTS:
		d.cleared(p, h)
	case device.KindData:
		p.mu.Lock()
		r := p.rdvRecv[h.Seq]
		ok := r != nil && r.chunked && sameMessage(&r.h, &device.Header{Source: h.Source, Dest: h.Dest, Context: h.Context,
			Tag: h.Tag, Seq: h.Seq, Length: r.h.Length}) && h.offset == uint64(r.got) && h.offset+h.Length <= uint64(r.n)
		if ok {
			if r.dst != nil {
				copy(r.dst[r.got:], payload)
			} else {
				r.segs.Scatter(r.got, payload)
			}
			r.got += len(payload)
		}
		p.mu.Unlock()
		if !ok {
			d.failPeer(p, &PeerError{Node: p.id, Kind: ErrPeerLost, Err: badf(p.id, "data for message %d at offset %d that is not expected", h.Seq, h.offset)}, true)
			return
		}
		d.finishRecv(p, r)
	case kindFin:
		p.mu.Lock()
		s := p.rdvSend[h.Seq]
		ok := s != nil && s.needFin && !s.finGot && sameMessage(&s.h, &h.Header)
		if ok {
			s.finGot = true
		}
		p.mu.Unlock()
		if !ok {
			d.failPeer(p, &PeerError{Node: p.id, Kind: ErrPeerLost, Err: badf(p.id, "FIN for unknown message %d", h.Seq)}, true)
			return
		}
		d.finishSend(p, s)
	case kindWDone:
		p.mu.Lock()
		r := p.rdvRecv[h.Seq]
		ok := r != nil && r.needWDone && !r.wdone && sameMessage(&r.h, &h.Header)
		if ok {
			r.wdone = true
		}
		p.mu.Unlock()
		if !ok {
			d.failPeer(p, &PeerError{Node: p.id, Kind: ErrPeerLost, Err: badf(p.id, "WDONE for unknown message %d", h.Seq)}, true)
			return
		}
		d.finishRecv(p, r)
	case device.KindAck:
		p.mu.Lock()
		e := p.syncWait[h.Seq]
		ok := e != nil && e.h.Source == h.Source && e.h.Dest == h.Dest && e.h.Tag == h.Tag && e.h.Context == h.Context
		if ok {
			delete(p.syncWait, h.Seq)
		}
		p.mu.Unlock()
		if !ok {
			d.failPeer(p, &PeerError{Node: p.id, Kind: ErrPeerLost, Err: badf(p.id, "ACK for unknown message %d", h.Seq)}, true)
			return
		}
		d.inflight.Add(-1)
		e.done.Complete(nil)
	case kindCredit:
	}
}

// cleared handles the CTS of one of our rendezvous sends: Write our part (split), stream DATA (no RMA), or
// finish (an empty message, or one the receiver takes none of). The CTS's length is what the receiver takes: the
// whole message, or its first bytes into a shorter buffer (truncation); nothing past it is sent.
func (d *Device) cleared(p *peer, h *hdr) {
	p.mu.Lock()
	s := p.rdvSend[h.Seq]
	whole := h.Header
	if s != nil {
		whole.Length = s.h.Length
	}
	if s == nil || !sameMessage(&s.h, &whole) || h.Length > s.h.Length || s.wantWrite || s.streaming || s.untaken ||
		(h.Flags&flagRMA == 0 && h.offset != 0) {
		p.mu.Unlock()
		d.failPeer(p, &PeerError{Node: p.id, Kind: ErrPeerLost, Err: badf(p.id, "CTS for unknown message %d", h.Seq)}, true)
		return
	}
	var writes []*rmaOp
	switch {
	case s.size == 0:
	case h.Length == 0:
		// A truncated receive that takes nothing.
		if h.Flags&flagRMA != 0 {
			p.mu.Unlock()
			d.failPeer(p, &PeerError{Node: p.id, Kind: ErrPeerLost, Err: badf(p.id, "CTS asking for a write of none of message %d", h.Seq)}, true)
			return
		}
		s.needFin = false
		s.untaken = true
	case s.pieces:
		// Our payload is in pieces: we Write what the receiver takes into its buffer, from its start.
		if h.Flags&flagRMA == 0 || h.offset != 0 {
			p.mu.Unlock()
			d.failPeer(p, &PeerError{Node: p.id, Kind: ErrPeerLost, Err: badf(p.id, "CTS without a buffer for message %d, which is in pieces", h.Seq)}, true)
			return
		}
		s.wantWrite = true
		s.id = d.opID.Add(1)
		d.ops.Store(s.id, s)
		writes = d.piecesRMA(true, nil, device.Payload{Segs: s.segs.Segs, Off: s.segs.Off, Len: int(h.Length)}, h.raddr,
			h.rkey, ctxWrite|s.id)
		s.writing = len(writes)
	case h.Flags&flagRMA != 0:
		if !s.needFin || !s.claimOpen || !(p.rma.Load() || p.lent.Load()) || h.offset >= h.Length {
			p.mu.Unlock()
			d.failPeer(p, &PeerError{Node: p.id, Kind: ErrPeerLost, Err: badf(p.id, "CTS asking for a write of message %d that was not offered", h.Seq)}, true)
			return
		}
		won, err := d.splitter.Claim(d.self, s.claim)
		if err != nil {
			p.mu.Unlock()
			d.failPeer(p, &PeerError{Node: p.id, Kind: ErrPeerLost, Err: err}, true)
			return
		}
		if !won {
			// The receiver, done with its part before we saw the CTS, Reads ours too: its FIN completes us.
			break
		}
		s.wantWrite = true
		s.id = d.opID.Add(1)
		d.ops.Store(s.id, s)
		writes = d.splitInto(&s.ops, 0, true, s.payload[h.offset:h.Length], s.reg.mr, h.raddr, h.rkey, ctxWrite|s.id)
		s.writing = len(writes)
	default:
		// The receiver cannot Read us (no RMA its way, or it chose not to): stream the payload, what it takes.
		s.needFin = false
		s.payload = s.payload[:h.Length]
		d.startStream(p, s)
	}
	p.mu.Unlock()
	if len(writes) > 0 {
		d.issueAll(p, writes)
		return
	}
	d.finishSend(p, s)
}

// rmaDone handles the completion of a Read (receiver) or Write (sender).
func (d *Device) rmaDone(p *peer, c *Completion) {
	id := c.Ctx &^ ctxKind
	v, ok := d.ops.Load(id)
	if !ok || p == nil {
		d.fatal(fmt.Errorf("rdma: node %d: the provider completed an unknown %s (ctx %#x)", d.self, c.Op, c.Ctx))
		return
	}
	if c.Err != nil {
		d.failPeer(p, &PeerError{Node: p.id, Kind: ErrPeerLost, Err: c.Err}, true)
		return
	}
	switch op := v.(type) {
	case *rdvRecv:
		p.mu.Lock()
		op.reading--
		last := op.reading == 0
		var rest []*rmaOp
		if last && op.claimPending {
			// Our part is in. The sender's part is ours too unless it claimed it first (then its WDONE follows).
			op.claimPending = false
			won, err := d.splitter.Claim(p.id, op.claim)
			if err != nil {
				p.mu.Unlock()
				d.failPeer(p, &PeerError{Node: p.id, Kind: ErrPeerLost, Err: err}, true)
				return
			}
			if won {
				rest, last = op.rest, false
				op.reading, op.needWDone = len(rest), false
			}
			op.rest = nil
		}
		if last {
			op.readAll = true
			d.ops.Delete(id)
		}
		p.mu.Unlock()
		if len(rest) > 0 {
			d.issueAll(p, rest)
			return
		}
		if !last {
			return
		}
		fin := hdr{Header: op.h}
		fin.Kind = kindFin
		fin.Flags &= device.FlagSync
		if err := d.send(p, &fin, nil); err != nil {
			d.failPeer(p, &PeerError{Node: p.id, Kind: ErrPeerLost, Err: err}, true)
			return
		}
		d.finishRecv(p, op)
	case *rdvSend:
		p.mu.Lock()
		op.writing--
		last := op.writing == 0
		if last {
			op.wroteAll = true
			d.ops.Delete(id)
		}
		p.mu.Unlock()
		if !last {
			return
		}
		wd := hdr{Header: op.h}
		wd.Kind = kindWDone
		wd.Flags &= device.FlagSync
		if err := d.send(p, &wd, nil); err != nil {
			d.failPeer(p, &PeerError{Node: p.id, Kind: ErrPeerLost, Err: err}, true)
			return
		}
		d.finishSend(p, op)
	}
}

// finishSend completes a rendezvous send whose every part is done.
func (d *Device) finishSend(p *peer, s *rdvSend) {
	p.mu.Lock()
	done := (!s.needFin || s.finGot) && (!s.wantWrite || s.wroteAll) && (!s.streaming || s.streamed) &&
		(s.needFin || s.wantWrite || s.streaming || s.untaken || s.size == 0)
	if done {
		if _, mine := p.rdvSend[s.h.Seq]; !mine {
			done = false // failPeer took it
		}
		delete(p.rdvSend, s.h.Seq)
	}
	p.mu.Unlock()
	if !done {
		return
	}
	s.release(d)
	d.inflight.Add(-1)
	if s.done != nil {
		s.done.Complete(nil)
	}
	sendPool.Put(s)
}

// finishRecv completes a rendezvous receive whose every part is in place.
func (d *Device) finishRecv(p *peer, r *rdvRecv) {
	p.mu.Lock()
	done := (!r.wantRead || r.readAll) && (!r.needWDone || r.wdone) && (!r.chunked || r.got == r.n)
	if done {
		if _, mine := p.rdvRecv[r.h.Seq]; !mine {
			done = false
		}
		delete(p.rdvRecv, r.h.Seq)
	}
	p.mu.Unlock()
	if !done {
		return
	}
	if r.stage != nil {
		r.segs.Scatter(0, r.dst)
	}
	r.release(d)
	d.inflight.Add(-1)
	if r.done != nil {
		r.done.Complete(nil)
	}
	recvPool.Put(r)
}

// releaseInbound is every Inbound's Release: the buffer goes back to the provider and the credit to the peer.
func (d *Device) releaseInbound(in *device.Inbound) {
	rb := inboundBuf(in)
	in.Release = nil
	in.Payload = nil
	p := d.peerByNode(rb.peer) // before the repost: then the poller may fill rb with the next message
	if !rb.copied {
		d.rx.repost(rb)
	}
	d.owe(p)
}

// owe counts an eager message from p as taken, its credit owed back: returned once a batch is owed, in a credit
// message unless traffic toward p carries it first.
func (d *Device) owe(p *peer) {
	if p == nil {
		return
	}
	if p.owed.Add(1) >= d.batch && !d.closing.Load() {
		p.mu.Lock()
		if p.err == nil && len(p.backlog) == 0 && p.owed.Load() >= d.batch {
			h := hdr{Header: device.Header{Kind: kindCredit, Source: -1, Dest: -1}}
			d.sendLocked(p, &h, nil, false)
		}
		p.mu.Unlock()
	}
}

// failPeer makes p unusable: everything pending with it completes with err and, for a loss (not a clean close),
// the sink hears of it once. Called by the poller (pollMu held) or after the loop ended.
func (d *Device) failPeer(p *peer, err error, lost bool) {
	if p.failed {
		return
	}
	p.failed = true
	p.mu.Lock()
	if p.err == nil {
		p.err = err
	}
	sw, rs, rr := p.syncWait, p.rdvSend, p.rdvRecv
	p.syncWait, p.rdvSend, p.rdvRecv = map[uint64]*syncEntry{}, map[uint64]*rdvSend{}, map[uint64]*rdvRecv{}
	p.rtsIn = map[uint64]hdr{}
	p.backlog = nil
	if p.queued {
		p.queued = false
		d.pending.Add(-1)
	}
	p.mu.Unlock()
	p.held = map[uint32]heldMsg{}
	for _, e := range sw {
		d.inflight.Add(-1)
		e.done.Complete(err)
	}
	for _, s := range rs {
		d.ops.Delete(s.id)
		s.release(d)
		d.inflight.Add(-1)
		if s.done != nil {
			s.done.Complete(err)
		}
	}
	for _, r := range rr {
		d.ops.Delete(r.id)
		r.release(d)
		d.inflight.Add(-1)
		if r.done != nil {
			r.done.Complete(err)
		}
	}
	if lost && !p.reported {
		p.reported = true
		d.sink.PeerLost(p.id, err)
	}
}

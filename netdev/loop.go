//go:build linux

package netdev

import (
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/netdev/auth"
)

// readBudget bounds the bytes read from one connection per turn, so that one busy peer cannot starve the others.
const readBudget = 4 << 20

// maxHandshakes bounds concurrent inbound handshakes; connections beyond it are closed at once.
const maxHandshakes = 64

// A driving rank reads up to directMax connections directly, and polls epoll every directEvery rounds.
const (
	directMax   = 2
	directEvery = 8
)

// standDownFor is how long a loop that stands down waits before it looks again (device.StandDownFor): the shorter
// time while rendezvous transfers are under way.
func (d *Device) standDownFor() time.Duration {
	return device.StandDownFor(d.inflightRdv.Load() > 0 || d.inflightRecv.Load() > 0)
}

// loop is the device's progress engine: one goroutine, one epoll set holding every connection. Everything the
// comments call "loop only" is guarded by pollMu, which the loop holds while it polls and handles events and which
// a driving rank holds during Poll.
func (d *Device) loop() {
	defer close(d.loopDone)
	resume := time.NewTimer(device.StandDownCheck)
	resume.Stop()
	for {
		if d.drivers.Load() > 0 && !d.hasTasks() && d.standDownOK() {
			// A rank is driving the device (Poll): stand down until the last driver parks, or look again soon.
			resume.Reset(d.standDownFor())
			d.sleep.hush(d.ep, true)
			d.standing.Store(true)
			select {
			case <-d.kick:
			case <-resume.C:
			case <-d.quit:
			}
			d.standing.Store(false)
			resume.Stop()
			continue
		}
		d.pollMu.Lock()
		if d.loopExited {
			d.pollMu.Unlock()
			return
		}
		timeout := -1
		busy := time.Duration(d.busyPoll.Load())
		switch {
		case len(d.pendingRead) > 0:
			timeout = 0
		case d.closeState > 0:
			timeout = 5 // ms: Close's deadlines are checked between events
		case busy > 0 && time.Since(d.lastActive) < busy:
			timeout = 0
		}
		var n int
		var err error
		if timeout != 0 {
			// Enter wakes a blocked loop through the eventfd when it sees loopBlocked; checking drivers after
			// setting it closes the race (both are sequentially consistent atomics).
			d.loopBlocked.Store(true)
			if d.drivers.Load() > 0 && d.closeState == 0 && !d.hasTasks() {
				d.loopBlocked.Store(false)
				d.pollMu.Unlock()
				continue
			}
			// The loop sleeps in an epoll set of its own, which holds the eventfd and the device's set (ready when
			// a connection is), parked in the netpoller (sleeper), and without pollMu:
			//   - a rank that starts to drive polls at once rather than wait for this thread to be woken and
			//     scheduled, which on a box whose cores the ranks hold takes up to a time slice;
			//   - a driving rank's polls of the device's set cannot take the eventfd's wake-up meant for the loop.
			//     They could when the eventfd was in that set, and the loop then slept on through the drive, woken
			//     (and taking a core from a spinning rank) by every arriving frame only to find that the rank had
			//     taken it: about 20 sleeps per epoll_wait in a TCP ping-pong (perf sched_switch).
			// What it then finds it handles under the lock, after any Poll under way (reads are non-blocking: a
			// connection a rank drained reads nothing).
			d.pollMu.Unlock()
			d.sleep.hush(d.ep, false)
			n, err = d.sleep.sleep(timeout)
			d.loopBlocked.Store(false)
			// The wake-up is consumed before looking for tasks, so that a task posted after the look rings again.
			woken := false
			for i := 0; err == nil && i < n; i++ {
				woken = woken || d.loopEvs[i].Fd == int32(d.evfd)
			}
			if woken {
				d.takeWake()
			}
			if err == nil && d.drivers.Load() > 0 && !d.hasTasks() && !d.closing.Load() {
				// A rank started to drive (its Enter woke us) or drives already: it polls the device's set itself,
				// which this wait did not drain. Stand down without taking the device: the rank's next Poll must
				// not find it held by a thread that, on a box whose cores the ranks hold, may wait for a processor
				// (idle overlap of a 1 MiB ialltoall over TCP, 5 interleaved pairs: 37 -> 59 %). Not while closing:
				// Close's steps are the loop's (handle), and a driver that stopped polling without leaving had held
				// them off until the close timeout (TestDrivenProgress's Close took 10.0 s, its limit).
				continue
			}
			d.pollMu.Lock()
			if d.loopExited {
				d.pollMu.Unlock()
				return
			}
			if err != nil {
				if exit := d.handle(nil, 0, err); exit {
					d.pollMu.Unlock()
					return
				}
				d.pollMu.Unlock()
				continue
			}
			if woken {
				d.runTasks()
			}
		} else if d.hasTasks() {
			d.takeWake()
			d.runTasks()
		}
		d.loopHandles.Store(d.clock())
		h := d.helper.Load()
		if h != nil {
			(*h).Round()
		}
		n, err = pollNow(d.ep, d.evs)
		exit := d.handle(d.evs, n, err)
		d.loopHandles.Store(0)
		d.pollMu.Unlock()
		if h != nil {
			(*h).Help()
		}
		if exit {
			return
		}
	}
}

// SetHelper gives the loop work to do between its rounds (device.Helper): the node's worker pool's tasks that the
// completions it delivers queue. It may be set at any time.
func (d *Device) SetHelper(h device.Helper) { d.helper.Store(&h) }

// loopGrace is how long a polling rank lets the loop handle events (it holds the device) before it waits for it
// parked rather than spinning: a loop with a core reads 1 MiB from a socket in about 100 us here.
const loopGrace = 50 * time.Microsecond

// clock is monotonic time in nanoseconds since the device was made, never 0.
func (d *Device) clock() int64 { return int64(time.Since(d.epoch)) + 1 }

// takeWake consumes the eventfd's wake-ups (loop only).
func (d *Device) takeWake() {
	var b [8]byte
	unix.Read(d.evfd, b[:])
}

// hasTasks reports whether tasks were posted: the loop runs them itself, since a driver may have stopped polling.
func (d *Device) hasTasks() bool {
	d.taskMu.Lock()
	n := len(d.tasks)
	d.taskMu.Unlock()
	return n > 0
}

// standDownOK reports whether the loop may leave progress to driving ranks: not while closing or with reads
// pending from a spent budget (a driver would handle those too, but Close's steps belong to the loop).
func (d *Device) standDownOK() bool {
	d.pollMu.Lock()
	ok := d.closeState == 0 && !d.loopExited
	d.pollMu.Unlock()
	return ok
}

// handle processes one poll's events (pollMu held). It reports true when the loop must exit.
func (d *Device) handle(evs []unix.EpollEvent, n int, err error) bool {
	if err != nil {
		if err == unix.EINTR {
			return false
		}
		d.closeReport = fmt.Errorf("netdev: node %d: epoll_wait: %w", d.self, err)
		d.killAll(d.closeReport)
		d.loopExited = true
		return true
	}
	if n > 0 {
		d.lastActive = time.Now()
	}
	if len(d.pendingRead) > 0 {
		pend := d.pendingRead
		d.pendingRead = nil
		for _, c := range pend {
			d.readConn(c)
		}
	}
	for i := range n {
		ev := &evs[i]
		c := d.conns[ev.Fd]
		if c == nil {
			continue // closed earlier in this batch
		}
		if ev.Events&unix.EPOLLOUT != 0 {
			d.flushConn(c)
		}
		if ev.Events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 && !c.closed {
			d.readConn(c)
		}
	}
	if d.closeState > 0 && d.closeStep() {
		d.loopExited = true
		return true
	}
	return false
}

// SetBusyPoll changes how long the progress loop polls after the last event before it sleeps in epoll (<= 0: it
// sleeps at once), from its next round. A node sets it once it knows how many ranks share the host's cores, which
// it learns after the devices are open: where ranks outnumber cores, a loop that polls for 50 us after every event
// holds a processor that runnable ranks wait for. (gompj bench allreduce -np 8 -nodes 2, GOMPJ_HOST_SHM=0, on 2
// cores, 5 interleaved pairs: 8 B 164 -> 43 us, 64 KiB 351 -> 232 us.)
func (d *Device) SetBusyPoll(t time.Duration) { d.busyPoll.Store(int64(t)) }

// Enter implements device.Poller: the calling rank will drive the device until Leave.
func (d *Device) Enter() {
	if d.drivers.Add(1) == 1 && d.loopBlocked.Load() {
		d.wake()
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

// Poll implements device.Poller: one non-blocking round of the progress loop's work on the caller's goroutine.
func (d *Device) Poll() bool {
	if !d.pollMu.TryLock() {
		since := d.loopHandles.Load()
		if since == 0 || d.clock()-since < int64(loopGrace) {
			// Another rank polls, for all of them; or the loop holds the device (its round, or posted tasks: a
			// stream to write), and has not taken long yet. The loop may be waiting for this very core.
			if d.idle.Polled(false, yieldEvery) {
				schedYield()
			}
			return false
		}
		// The loop has been handling events for a while (it took the device before this rank came to drive it),
		// and what this rank waits for is most likely among them. Wait for it parked on the lock rather than spin:
		// on a box whose cores the ranks hold, the loop's thread may be waiting for the core this rank spins on.
		// Traced, a rank back from an idle computation spun 2.2 ms on a loop that held the device through a 1 MiB
		// read (gompj bench ialltoall -np 2 -nodes 2 -compute idle, GOMPJ_HOST_SHM=0). A round of the loop is
		// bounded (readBudget per connection), and the loop takes nothing a polling rank holds.
		d.pollMu.Lock()
	}
	if d.loopExited || d.closeState > 0 {
		d.pollMu.Unlock()
		return false
	}
	d.polls++
	if k := len(d.readable); k > 0 && k <= directMax && d.polls%directEvery != 0 {
		// Few connections: read them straight away, without asking epoll first (one system call per arrival
		// instead of two). Every directEvery-th round asks epoll, for writes and errors (posted tasks are the
		// loop's: a post kicks a loop that stood down).
		got := false
		for _, c := range d.readable {
			if d.readConn(c) {
				got = true
			}
		}
		if len(d.pendingRead) > 0 {
			d.handle(nil, 0, nil)
		}
		if got {
			d.lastActive = time.Now()
		}
		yield := d.idle.Polled(got, yieldEvery)
		d.pollMu.Unlock()
		if yield {
			schedYield()
		}
		return got
	}
	n, err := pollNow(d.ep, d.evs)
	if err == nil && n == 0 && len(d.pendingRead) == 0 {
		yield := d.idle.Polled(false, yieldEvery)
		d.pollMu.Unlock()
		if yield {
			schedYield()
		}
		return false
	}
	d.idle.Polled(true, yieldEvery)
	if d.handle(d.evs, n, err) {
		// Only a failing epoll_wait ends the loop from here; the loop sees loopExited and stops.
		d.pollMu.Unlock()
		d.wake()
		return true
	}
	d.pollMu.Unlock()
	return n > 0
}

// yieldEvery is how many driving Polls in a row find nothing before the rank gives its core away for a moment
// (device.IdleYield). Traced over TCP (2 node processes on 2 vCPUs, 1 MiB Iallreduce, idle computation), a rank back
// from its computation spun for its 1 ms window while the other process's loop, runnable, waited 0.9 ms to finish
// writing a 48-byte RTS. A Poll here is a system call itself, so the yields add at most a sixteenth to a spin.
//
// 20 alternated runs of gompj bench -compute idle at 1 MiB over TCP: overlap medians Iallreduce 64 -> 82 %, Ialltoall
// 68 -> 72, Ibcast 76 -> 89 (yielding every poll: 80, 73, 85); latency 8 B 4.56 -> 4.62 us, 1 MiB 181 -> 185 us,
// Allreduce 8 B 6.35 -> 6.44 us (5 alternated runs, within their noise).
const yieldEvery = 16

// wake interrupts a loop blocked in epoll_wait.
func (d *Device) wake() {
	d.taskMu.Lock()
	if !d.evClosed {
		var one = [8]byte{1}
		unix.Write(d.evfd, one[:])
	}
	d.taskMu.Unlock()
}

func (d *Device) runTasks() {
	for {
		d.taskMu.Lock()
		t := d.tasks
		d.tasks = d.spare[:0]
		d.spare = nil
		d.taskMu.Unlock()
		if len(t) == 0 {
			d.taskMu.Lock()
			d.spare = t
			d.taskMu.Unlock()
			return
		}
		for i, f := range t {
			f()
			t[i] = nil
		}
		d.taskMu.Lock()
		if d.spare == nil {
			d.spare = t[:0]
		}
		d.taskMu.Unlock()
	}
}

// flushConn writes what is queued on c (the loop's EPOLLOUT path, and after queuing a stream or a goodbye) and
// completes streams fully written. If another goroutine holds the write turn, it is asked to flush before it lets go.
func (d *Device) flushConn(c *conn) {
	c.mu.Lock()
	if c.writing {
		c.flushWanted = true
		c.mu.Unlock()
		return
	}
	var done []*rdvSend
	if c.fd >= 0 && c.dead == nil && !c.q.empty() {
		c.writing = true
		c.blocked = false // EPOLLOUT, or a first try: the socket may have room
		done = c.finishTurnLocked(false)
	}
	finished := c.byeSent && c.q.empty() && c.dead == nil
	c.mu.Unlock()
	d.finishStreams(c, done)
	if finished && c.byeRecv {
		d.closeConn(c)
	}
}

// finishStreams completes rendezvous sends whose payload is all in the socket, the list c's turn collected
// (finishTurnLocked). Each send then goes back to its pool, and the list to c for its next turn: a rendezvous
// allocates nothing at steady state.
func (d *Device) finishStreams(c *conn, done []*rdvSend) {
	if len(done) == 0 {
		return
	}
	for _, r := range done {
		d.finishSend(r, nil)
		sendPool.Put(r)
	}
	clear(done)
	c.mu.Lock()
	if c.spare == nil {
		c.spare = done[:0]
	}
	c.mu.Unlock()
}

func (d *Device) finishSend(r *rdvSend, err error) {
	d.inflightRdv.Add(-1)
	d.releaseStage(r)
	if r.done != nil {
		r.done.Complete(err)
	}
}

// readConn reads what c has, until the socket is drained or the turn's budget is spent.
func (d *Device) readConn(c *conn) (got bool) {
	if c.closed {
		return false
	}
	budget := readBudget
	for budget > 0 && !c.closed {
		var n int
		var err error
		if t, ok := c.rx.directv(); ok {
			var asked int
			n, asked, err = c.readPieces(t)
			if n > 0 {
				got = true
				budget -= n
				if perr := c.rx.advanceDirect(n, c); perr != nil {
					d.failPeer(c.p, d.lostErr(c, perr), true)
					return got
				}
			}
			if err == nil && n > 0 && n < asked { // less than asked: drained (not less than the payload: the
				return got // pieces of one readv are capped at device.IovMax)
			}
		} else if t := c.rx.direct(); t != nil {
			n, err = readFd(c.fd, t)
			if n > 0 {
				got = true
				budget -= n
				if perr := c.rx.advanceDirect(n, c); perr != nil {
					d.failPeer(c.p, d.lostErr(c, perr), true)
					return got
				}
			}
			if err == nil && n > 0 && n < len(t) {
				return got // drained: edge-triggered epoll reports the next arrival
			}
		} else {
			sp := c.rx.space()
			n, err = readFd(c.fd, sp)
			if n > 0 {
				got = true
				budget -= n
				c.rx.w += n
				if perr := c.rx.parse(&c.lim, c); perr != nil {
					d.failPeer(c.p, d.lostErr(c, perr), true)
					return got
				}
			}
			if err == nil && n > 0 && n < len(sp) {
				return got
			}
		}
		switch {
		case err == unix.EAGAIN:
			return got
		case err != nil:
			d.connBroken(c, err)
			return got
		case n == 0:
			d.connBroken(c, io.EOF)
			return got
		}
	}
	if !c.closed {
		d.pendingRead = append(d.pendingRead, c)
	}
	return got
}

func (d *Device) lostErr(c *conn, err error) error {
	return &PeerError{Node: c.p.id, Addr: c.p.addr, Kind: ErrPeerLost, Err: err}
}

// connBroken handles end-of-stream or a read error on c.
func (d *Device) connBroken(c *conn, err error) {
	if c.byeRecv {
		// The peer said goodbye on this connection, so its end is clean.
		d.closeConn(c)
		return
	}
	if err == io.EOF {
		err = errors.New("connection closed without goodbye (process died?)")
	}
	d.failPeer(c.p, d.lostErr(c, err), true)
}

// header is the read state machine's callback for each validated header (see frameHandler).
func (c *conn) header(h *device.Header, credit uint32) (target, error) {
	d, p := c.d, c.p
	if c.byeRecv {
		return target{}, badf(p.id, "kind %d after goodbye", h.Kind)
	}
	// Credit comes back for messages we sent, so a correct peer never returns more than the window (every node
	// grants the same: see newDevice) less what is still out. More is a peer's bug, which would make us overrun its
	// buffers.
	if credit > 0 {
		if c := p.credit.Add(int64(credit)); c > d.window {
			return target{}, badf(p.id, "%d bytes of credit returned, %d in all, over the window of %d", credit, c, d.window)
		}
	}
	switch h.Kind {
	case device.KindEager:
		// The peer's senders take credit before they send and never leave it more than their overdraft below
		// zero (takeCredit), and we count a message released before the credit for it can go back (returnCredit),
		// so a correct peer's unreleased eager cost never exceeds heldMax = window + its overdraft. More is a peer
		// that ignores its credit: fail it before a buffer is taken or a receive is claimed for the frame, so that
		// what it makes us hold stays bounded.
		cost := int64(h.Length) + creditOverhead
		if held := p.held.Add(cost); held > p.heldMax {
			return target{}, badf(p.id, "eager message of %d bytes would have %d bytes unreleased, over the %d its credit allows", h.Length, held, p.heldMax)
		}
		if d.claimer != nil {
			// Matched at the header: the payload goes straight into the receive, not through an Inbound.
			if dst, done, ok := d.claimer.ClaimEager(h); ok {
				if uint64(dst.Size()) != h.Length {
					return target{}, fmt.Errorf("netdev: internal: claimed buffer of %d bytes for a message of %d", dst.Size(), h.Length)
				}
				c.claim = done
				if dst.Segmented() { // a View's blocks: read straight into large ones, else scattered from the buffer
					return target{seg: dst, direct: !tiny(dst, 0, dst.Len)}, nil
				}
				return target{b: dst.Bytes}, nil
			}
		}
		c.cur = d.inPool.get(int(h.Length))
		return target{b: c.cur.Payload}, nil
	case device.KindCTS:
		p.mu.Lock()
		s := p.rdvSend[h.Seq]
		if s == nil || !sameMessage(&s.h, h) || h.Length > s.h.Length {
			p.mu.Unlock()
			return target{}, badf(p.id, "CTS for unknown message %d", h.Seq)
		}
		delete(p.rdvSend, h.Seq)
		p.mu.Unlock()
		// The receiver takes h.Length bytes: fewer than the message when its buffer is short (truncation).
		s.truncate(int(h.Length))
		d.startStream(p, s)
	case device.KindData:
		p.mu.Lock()
		r := p.rdvRecv[h.Seq]
		p.mu.Unlock()
		if r == nil || !sameMessage(&r.h, h) {
			return target{}, badf(p.id, "data for unknown message %d", h.Seq)
		}
		size := r.dst.Size()
		if h.Length > uint64(size-r.got) {
			return target{}, badf(p.id, "data frame of %d bytes overruns message %d (%d of %d bytes left)", h.Length, h.Seq, size-r.got, size)
		}
		c.curRecv = r
		if r.dst.Segmented() {
			return target{seg: device.Payload{Segs: r.dst.Segs, Off: r.dst.Off + r.got, Len: int(h.Length)}, direct: r.direct}, nil
		}
		return target{b: r.dst.Bytes[r.got : r.got+int(h.Length)]}, nil
	case device.KindAck:
		p.mu.Lock()
		e := p.syncWait[h.Seq]
		if e == nil || !sameMessage(&e.h, h) {
			p.mu.Unlock()
			return target{}, badf(p.id, "ack for unknown message %d", h.Seq)
		}
		delete(p.syncWait, h.Seq)
		p.mu.Unlock()
		e.done.Complete(nil)
	}
	return target{}, nil
}

func sameMessage(a, b *device.Header) bool {
	return a.Source == b.Source && a.Dest == b.Dest && a.Context == b.Context && a.Tag == b.Tag && a.Seq == b.Seq
}

// payload is the read state machine's callback once a frame's payload is complete.
func (c *conn) payload(h *device.Header) error {
	d, p := c.d, c.p
	switch h.Kind {
	case device.KindEager:
		if done := c.claim; done != nil {
			c.claim = nil
			d.returnCredit(h.Source, int(h.Length))
			done.Complete(nil)
			return nil
		}
		in := c.cur
		c.cur = nil
		in.Header = *h
		in.Release = d.releaseFn
		d.sink.DeliverEager(in)
	case device.KindRTS:
		// The sink keeps a copy (device.Sink): the connection's own header, which only its reader writes, goes
		// behind the interface without an allocation.
		c.rts = *h
		d.sink.DeliverRTS(&c.rts)
	case device.KindData:
		r := c.curRecv
		c.curRecv = nil
		r.got += int(h.Length)
		if r.got == r.dst.Size() {
			p.mu.Lock()
			_, mine := p.rdvRecv[r.h.Seq]
			delete(p.rdvRecv, r.h.Seq)
			p.mu.Unlock()
			if mine {
				d.inflightRecv.Add(-1)
			}
			if mine && r.done != nil {
				r.done.Complete(nil)
			}
			if mine {
				recvPool.Put(r) // nothing else holds it: the map let go, and c.curRecv is nil
			}
		}
	case kindBye:
		c.byeRecv = true
		d.onBye(c)
	}
	return nil
}

// startStream queues the payload of a cleared rendezvous send on its stripe's connection.
func (d *Device) startStream(p *peer, s *rdvSend) {
	if s.payload.Size() == 0 {
		d.finishSend(s, nil)
		sendPool.Put(s) // out of the peer's map (the CTS took it), and never queued
		return
	}
	c := p.slots[s.stripe]
	c.mu.Lock()
	if c.dead != nil {
		err := c.dead
		c.mu.Unlock()
		d.finishSend(s, err)
		return
	}
	wasEmpty := c.q.empty()
	c.q.push(seg{rdv: s})
	c.mu.Unlock()
	if wasEmpty && c.fd >= 0 {
		d.flushConn(c)
	}
}

// onBye: the peer will send nothing more on c. Answer with our own goodbye (after what we have queued) unless we
// sent one already; the connection closes once both are through. When every connection of the peer said goodbye,
// the peer is closed: what still waits on it fails with ErrPeerClosed (no PeerLost).
func (d *Device) onBye(c *conn) {
	c.queueBye()
	d.flushConn(c)
	p := c.p
	for _, o := range p.conns {
		if !o.byeRecv && !o.closed {
			return
		}
	}
	for _, o := range p.slots {
		o.mu.Lock()
		up := o.fd >= 0 || o.dead != nil
		o.mu.Unlock()
		if !up && !o.closed {
			return // a stripe never connected; the peer could still use it
		}
	}
	d.failPeer(p, &PeerError{Node: p.id, Addr: p.addr, Kind: ErrPeerClosed, Err: errors.New("it closed its device")}, false)
}

// closeConn closes c's socket (loop only).
func (d *Device) closeConn(c *conn) {
	if c.closed {
		return
	}
	c.closed = true
	c.mu.Lock()
	fd := c.fd
	c.fd = -1
	if c.dead == nil {
		c.dead = &PeerError{Node: c.p.id, Addr: c.p.addr, Kind: ErrPeerClosed, Err: errors.New("connection closed")}
	}
	streams := c.dropQueueLocked()
	closeFd := fd
	if c.writing && fd >= 0 {
		// A sender is in a system call on fd: it closes it when its turn ends, so that the number cannot be
		// reused under its write.
		c.closeFd, closeFd = fd, -1
	}
	c.mu.Unlock()
	if c.registered {
		unix.EpollCtl(d.ep, unix.EPOLL_CTL_DEL, fd, nil)
		delete(d.conns, c.id)
		c.registered = false
		for i, o := range d.readable {
			if o == c {
				d.readable = append(d.readable[:i], d.readable[i+1:]...)
				break
			}
		}
	}
	if closeFd >= 0 {
		unix.Close(closeFd)
	}
	if c.cur != nil {
		d.inPool.put(c.cur)
		c.cur = nil
	}
	if done := c.claim; done != nil {
		c.claim = nil
		done.Complete(c.dead) // the payload of a claimed message will never arrive
	}
	for _, s := range streams {
		d.finishSend(s, c.dead)
	}
	d.signalState()
}

// failPeer makes p unusable: closes its connections, fails everything waiting on it and, for a loss (not a clean
// close), tells the sink once. Loop only.
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
	d.inflightRecv.Add(-int64(len(rr)))
	p.mu.Unlock()
	for _, c := range p.slots {
		c.mu.Lock()
		if c.dead == nil {
			c.dead = err
		}
		c.mu.Unlock()
	}
	for _, c := range append(p.slots, p.conns...) {
		d.closeConn(c)
	}
	for _, e := range sw {
		e.done.Complete(err)
	}
	for _, s := range rs {
		d.finishSend(s, err)
	}
	for _, r := range rr {
		if r.done != nil {
			r.done.Complete(err)
		}
	}
	if lost {
		d.lostCount.Add(1)
		d.sink.PeerLost(p.id, err)
	}
	d.signalState()
}

// killAll fails every peer (the loop cannot go on).
func (d *Device) killAll(err error) {
	for _, p := range d.peers {
		if p != nil {
			d.failPeer(p, &PeerError{Node: p.id, Addr: p.addr, Kind: ErrPeerLost, Err: err}, true)
		}
	}
}

// attach adds an authenticated socket for (p, stripe): it becomes the stripe's connection if that has none yet,
// else an extra connection that is only read (and said goodbye on).
func (d *Device) attach(fd int, p *peer, stripe int) {
	if d.loopExited || p.failed || d.closeState >= 2 {
		unix.Close(fd)
		return
	}
	c := p.slots[stripe]
	c.mu.Lock()
	if c.fd >= 0 || c.dead != nil || c.closed {
		c.mu.Unlock()
		c = d.newConn(p, stripe)
		c.mu.Lock()
	}
	// Counted before the fd shows: WaitConnected returns once every slot has one, and a caller that then reads
	// Stats must find them all (TestStripesKeepOrder saw 3 of 4 connections when the count came last).
	d.attached.Add(1)
	c.fd = fd
	c.dialing = false
	c.mu.Unlock()
	c.id = d.nextID
	d.nextID++
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET, Fd: c.id}
	if err := unix.EpollCtl(d.ep, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		d.attached.Add(-1)
		d.failPeer(p, d.lostErr(c, fmt.Errorf("epoll add: %w", err)), true)
		unix.Close(fd)
		return
	}
	d.conns[c.id] = c
	c.registered = true
	d.readable = append(d.readable, c)
	p.conns = append(p.conns, c)
	if d.closeState >= 1 {
		c.queueBye()
	}
	d.signalState()
	// EPOLLOUT fires for the fresh registration and flushes whatever was queued before the connection was up.
}

// acceptLoop authenticates inbound connections, each in a short-lived goroutine bounded by maxHandshakes.
func (d *Device) acceptLoop() {
	sem := make(chan struct{}, maxHandshakes)
	for {
		nc, err := d.ln.Accept()
		if err != nil {
			if d.closing.Load() {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			select {
			case <-d.quit:
				return
			case <-time.After(10 * time.Millisecond): // e.g. EMFILE: back off, then keep serving
			}
			continue
		}
		select {
		case sem <- struct{}{}:
		default:
			d.rejected.Add(1)
			nc.Close()
			continue
		}
		if !d.track(nc, true) {
			nc.Close()
			return
		}
		if !d.spawn(func() {
			defer func() { <-sem }()
			d.handshakeIn(nc)
		}) {
			d.track(nc, false)
			nc.Close()
			return
		}
	}
}

func (d *Device) handshakeIn(nc net.Conn) {
	h, err := auth.Accept(nc, d.cfg.Secret, Purpose, d.cfg.HandshakeTimeout)
	d.track(nc, false)
	if err == nil && (int(h.To) != d.self || h.From < 0 || int(h.From) >= d.nnodes || int(h.From) == d.self || int(h.Stripe) >= d.cfg.Stripes ||
		d.peers[h.From] == nil) {
		err = fmt.Errorf("netdev: node %d: authenticated connection from %s claims node %d stripe %d for node %d", d.self, nc.RemoteAddr(), h.From, h.Stripe, h.To)
	}
	if err != nil {
		d.rejected.Add(1)
		nc.Close()
		return
	}
	fd, err := detach(nc, d.cfg.Congestion)
	if err != nil {
		d.rejected.Add(1)
		return
	}
	p, s := d.peers[h.From], int(h.Stripe)
	d.post(func() { d.attach(fd, p, s) })
}

// dial connects stripe s to p, retrying until ConnectTimeout.
func (d *Device) dial(p *peer, s int) {
	deadline := time.Now().Add(d.cfg.ConnectTimeout)
	backoff := 5 * time.Millisecond
	for {
		err := d.dialOnce(p, s)
		if err == nil {
			return
		}
		if errors.Is(err, auth.ErrAuth) || time.Now().After(deadline) {
			perr := d.lostErr(p.slots[s], fmt.Errorf("cannot connect stripe %d: %w", s, err))
			d.post(func() { d.failPeer(p, perr, true) })
			return
		}
		select {
		case <-d.quit:
			return
		case <-time.After(backoff): // retry pacing while the peer's listener comes up
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

func (d *Device) dialOnce(p *peer, s int) error {
	nc, err := net.DialTimeout("tcp", p.addr, d.cfg.HandshakeTimeout)
	if err != nil {
		return err
	}
	if !d.track(nc, true) {
		nc.Close()
		return device.ErrClosed
	}
	err = auth.Dial(nc, d.cfg.Secret, Purpose, auth.Hello{From: int32(d.self), To: int32(p.id), Stripe: uint32(s)}, d.cfg.HandshakeTimeout)
	d.track(nc, false)
	if err != nil {
		nc.Close()
		return err
	}
	fd, err := detach(nc, d.cfg.Congestion)
	if err != nil {
		return err
	}
	d.post(func() { d.attach(fd, p, s) })
	return nil
}

// checkConnectTimeout fails the peers that never connected (eager mesh only).
func (d *Device) checkConnectTimeout() {
	for _, p := range d.peers {
		if p == nil || p.failed {
			continue
		}
		for _, c := range p.slots {
			c.mu.Lock()
			up := c.fd >= 0 || c.closed
			c.mu.Unlock()
			if !up {
				d.failPeer(p, d.lostErr(c, fmt.Errorf("stripe %d not connected within %v", c.stripe, d.cfg.ConnectTimeout)), true)
				break
			}
		}
	}
}

// beginClose starts Close's drain phase (loop only).
func (d *Device) beginClose() {
	d.closeState = 1
	d.drainUntil = time.Now().Add(d.cfg.CloseTimeout)
	select { // a driving rank may have run this task: the loop takes Close's steps over at once
	case d.kick <- struct{}{}:
	default:
	}
}

// closeStep advances Close: drain, then goodbyes, then done (true).
func (d *Device) closeStep() bool {
	now := time.Now()
	if d.closeState == 1 {
		if !d.quiet() && now.Before(d.drainUntil) {
			return false
		}
		if !d.quiet() {
			d.closeReport = fmt.Errorf("netdev: node %d: close timed out after %v with traffic in flight (%d rendezvous sends)", d.self, d.cfg.CloseTimeout, d.inflightRdv.Load())
		}
		d.closeState = 2
		d.byeUntil = now.Add(d.cfg.CloseTimeout)
		for _, p := range d.peers {
			if p == nil || p.failed {
				continue
			}
			for _, c := range p.conns {
				if !c.closed {
					c.queueBye()
					d.flushConn(c)
				}
			}
		}
	}
	for _, p := range d.peers {
		if p == nil || p.failed {
			continue
		}
		for _, c := range p.conns {
			if !c.closed && now.Before(d.byeUntil) {
				return false
			}
		}
	}
	// Everything said goodbye (or the deadline passed): close what is left without reporting losses.
	for _, p := range d.peers {
		if p == nil {
			continue
		}
		p.failed = true
		p.mu.Lock()
		if p.err == nil {
			p.err = &PeerError{Node: p.id, Addr: p.addr, Kind: ErrPeerClosed, Err: device.ErrClosed}
		}
		p.mu.Unlock()
		for _, c := range append(p.slots, p.conns...) {
			d.closeConn(c)
		}
	}
	return true
}

// quiet reports whether nothing handed to the device is still in flight.
func (d *Device) quiet() bool {
	if d.inflightRdv.Load() > 0 {
		return false
	}
	for _, p := range d.peers {
		if p == nil || p.failed {
			continue
		}
		p.mu.Lock()
		n := len(p.rdvRecv)
		p.mu.Unlock()
		if n > 0 {
			return false
		}
		for _, c := range p.slots {
			c.mu.Lock()
			busy := !c.q.empty() && c.dead == nil
			c.mu.Unlock()
			if busy {
				return false
			}
		}
	}
	return true
}

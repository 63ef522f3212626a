package nbc

import (
	"sync/atomic"

	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/queues"
	"github.com/gompj/gompj/ranks"
)

// A node-aware Ibarrier's leader without an operation, when there are two leaders (two nodes).
//
// The leaders' barrier is then one exchange: each leader sends the other an empty message once its node's count is
// through, and its node is through once that is done and the other's message has come (the dissemination schedule
// of two members, with the same tag: p2p.go). Nothing of an operation is needed for it: the leader's call posts the
// receive, arrives at the node's count like every member, and returns a request on the node's release, as the
// members' requests are (hierGate.arrive). Then:
//
//   - the send goes from whichever call completes the node's count: the leader's own, or a member's arrival, whose
//     notify runs the run's count hook (as it ran the leader's operation before: op.runInline), on that member's
//     goroutine, in its call;
//   - the receive's hook, on whichever goroutine completes it (a rank that drives the device, or the device's own
//     loop, under its lock), counts it;
//   - the last of the two releases the node (NodeRelease.Release), which wakes only the completion calls waiting on
//     the release (its own event: no hook that sends runs under the device's lock).
//
// The node's requests wait on the release with the device as driver (ranks.NetGateRequest): a member or the leader
// that waits reads the other leader's message off the device, whoever it is. A rank that computes holds nobody
// back: its message went at the count, from whichever call completed it.
//
// Among 4 ranks on 2 node processes of one processor each, the leader's operation (its start, its machine, its
// sub-operation among the leaders, its request on the rank's list of operations) cost Ibarrier 1.35-1.47x Barrier's
// time; without it, 0.87-0.91x (OSU's pure time, 5 and 8 pairs alternated with the build before, medians).
//
// More leaders take the operation (hier.go: gatedBarrier): a dissemination round after the first needs the receive
// of the round before, and a send from a receive's hook would run under the device's lock.

// leadGate is a leader's state for its node-aware Ibarriers on a communicator (newLeadGate).
type leadGate struct {
	leaders *ranks.Comm
	peer    int // the other leader's rank among the leaders
	node    *ranks.Comm
	count   *collectives.NodeCount
	rel     *collectives.NodeRelease
	runs    []*leadRun // this leader's barriers, outstanding or done; reused once collected
}

// newLeadGate returns a leader's state for its node-aware Ibarriers (hierarchy h) without an operation, or nil if
// they need one (more than two leaders). It depends on the number of nodes alone, which every member knows: the
// leaders' barrier is the dissemination schedule whatever the table names for it, and two leaders are on two nodes,
// where no shared-memory algorithm applies.
func newLeadGate(h *collectives.Hier, rel *collectives.NodeRelease) *leadGate {
	if h.Leaders == nil || len(h.Members) != 2 || rel == nil {
		return nil
	}
	return &leadGate{leaders: h.Leaders, peer: 1 - h.Leaders.Rank(), node: h.Node, count: collectives.NodeCountOf(h.Node),
		rel: rel}
}

// leadRun is one of a leader's barriers (see above). The leader's call writes it while it is free; its hooks read
// it from other goroutines once it is armed (unsent set), so what they read is written before that.
type leadRun struct {
	g    *leadGate
	at   atomic.Uint64 // the count that completes the node's phase, and that the release raises
	tag  int
	recv ranks.Child // the other leader's message
	send ranks.Child // this leader's, once it has gone and left counts it
	// unsent is at while the run's message has not gone, else 0 (sent, or the run free). The call that sends
	// claims it by swapping at for 0: a count hook listed for an earlier use of the run may run late, after the
	// leader took the run again, and must not claim the new use with the old count, which every barrier's count
	// tells apart.
	unsent atomic.Uint64
	// left counts what the release waits for: the send and the receive; whoever takes it to 0 releases
	left                atomic.Int32
	countHook, recvHook *queues.Waker
}

// start starts the leader's barrier on c (the communicator, whose operation id it takes as the operation did) and
// returns its request.
func (g *leadGate) start(c *ranks.Comm) (*ranks.Request, error) {
	collectives.NextOp(c)
	r, err := g.begin(collectives.Tag(collectives.NextOp(g.leaders), tagBarrier))
	if err != nil {
		return nil, err
	}
	at, _ := collectives.ArriveBarrier(g.node)
	req := c.NetGateRequest(g.rel, at, 0)
	collectives.BarrierRequest(g.node, req)
	r.arm(at)
	return req, nil
}

// startRun starts a run of the leader's persistent barrier (hiergate.go: gateStarter) on its request h; its
// messages take tag, its Init's.
func (g *leadGate) startRun(h *ranks.Request, tag int) error {
	r, err := g.begin(tag)
	if err != nil {
		return err
	}
	at, _ := collectives.ArriveBarrier(g.node)
	if err := ranks.StartGate(h, g.rel, at, 0, true); err != nil {
		return collectives.Broken(g.leaders, err) // arrived: the node's members wait for the release
	}
	collectives.BarrierRequest(g.node, h)
	r.arm(at)
	return nil
}

// begin takes a free run for a barrier whose messages take tag, and posts the receive of the other leader's.
func (g *leadGate) begin(tag int) (*leadRun, error) {
	r := g.free()
	recv, err := g.leaders.RecvChild(ranks.BytesMem(nil), g.peer, tag)
	if err != nil {
		return nil, err
	}
	r.recv, r.send, r.tag = recv, ranks.Child{}, tag
	return r, nil
}

// arm lets r's hooks go once the leader has arrived at count at: from here the run sends and releases.
func (r *leadRun) arm(at uint64) {
	r.at.Store(at)
	r.left.Store(2)
	r.unsent.Store(at)
	if f := r.recv.Flag(); f == nil || !f.OnComplete(r.recvHook) {
		r.received() // the message was there
	}
	r.tryCount()
}

// free returns a run that no barrier uses, its children collected: a new one if every run is in use.
func (g *leadGate) free() *leadRun {
	for _, r := range g.runs {
		if r.left.Load() == 0 && r.collect() {
			return r
		}
	}
	r := &leadRun{g: g}
	r.countHook = queues.NewHook(r.tryCount)
	r.recvHook = queues.NewHook(r.received)
	g.runs = append(g.runs, r)
	return r
}

// collect gives r's children back to the leader's rank, once they are done; it reports whether r is free.
func (r *leadRun) collect() bool {
	if f := r.send.Flag(); f != nil && !f.Done() {
		return false // an eager send the device had to queue, not out yet
	}
	r.send.Collect()
	r.recv.Collect()
	r.send, r.recv = ranks.Child{}, ranks.Child{}
	return true
}

// tryCount sends the leader's message once the node's count is through, or has the count's next notify run it
// again (the count hook). On the leader's goroutine in its call, or on that of a member whose arrival notified.
func (r *leadRun) tryCount() {
	at := r.unsent.Load()
	if at == 0 {
		return
	}
	if !r.g.count.Reached(at) {
		r.g.count.Watch(at, 0, r.countHook) // runs the hook at once if the count got there meanwhile
		return
	}
	if !r.unsent.CompareAndSwap(at, 0) {
		return
	}
	k, err := r.g.leaders.SendChild(ranks.BytesMem(nil), r.g.peer, r.tag)
	if err != nil {
		collectives.Broken(r.g.leaders, err) // the node's members, and the other node, wait for it
		return
	}
	r.send = k
	r.done(at)
}

// received counts the other leader's message: the receive's hook, on the goroutine that completed it.
func (r *leadRun) received() {
	at := r.at.Load()
	if err := r.recv.Err(); err != nil {
		collectives.Broken(r.g.leaders, err)
		return
	}
	r.done(at)
}

// done counts one of what the release waits for; the last releases count at. at was read before: once left is 0,
// the leader's next call may take the run again.
func (r *leadRun) done(at uint64) {
	if r.left.Add(-1) == 0 {
		r.g.rel.Release(at)
	}
}

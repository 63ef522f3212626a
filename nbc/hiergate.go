package nbc

import (
	"sync/atomic"

	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/queues"
	"github.com/gompj/gompj/ranks"
)

// A node-aware Ibarrier (a communicator spread over nodes, several members on a node) passes its node's phase on
// the node communicator's barrier count, where the blocking node-aware barrier passes its own (collectives: the
// account before NodeCount):
//
//   - every member arrives at the count in its call (collectives.ArriveBarrier on the node's communicator), as its
//     Barrier's first node phase does;
//   - a member other than the node's leader runs no operation at all: its request waits until the leader releases
//     the count its arrival completes (collectives.NodeRelease, ranks.NetGateRequest);
//   - the leader's operation waits for that count (gateSub), passes the barrier among the leaders over the network
//     (a phase of its own, as before), and releases its node (releaseSub). Between two nodes the leader runs no
//     operation either: the leaders' barrier is one exchange of messages, which hooks carry out (lead.go).
//
// Before, each node phase was a tiny call (tiny.go): a slot's entries, the last arrival's run, the members'
// requests, and the leader's operation run again by whichever member completed a phase. Among 4 ranks on 2 node
// processes (a processor each), Ibarrier took 1.60x Barrier's time; with the count 1.35x, and without the leader's
// operation 0.87-0.91x (alternated pairs, medians).
//
// Every member of a node takes this path or none (nodeGated depends only on what they share), and both paths take
// the same operation ids on the communicator and on the leaders' (the node phases take none here, on any member).

// hierGate is a member's state for its node-aware Ibarriers on a communicator (nil: the node phases are not in
// shared memory, and the op's schedule runs them).
type hierGate struct {
	node   *ranks.Comm
	rel    *collectives.NodeRelease
	leader bool
	lead   *leadGate // the leader's way without an operation, when there are two leaders (lead.go); else nil
	nodes  int       // how many nodes the communicator spans
}

// hierGateOf returns member c's hierGate, made on first use (collectively, as the node-aware op builds the
// communicators), or nil if c's Ibarriers do not take the path (nodeGated).
func hierGateOf(c *ranks.Comm, cc *commCache) (*hierGate, error) {
	if cc.hgate != nil || cc.hgateNo {
		return cc.hgate, nil
	}
	h, err := collectives.Hierarchy(c)
	if err != nil {
		return nil, err
	}
	if !nodeGated(h) {
		cc.hgateNo = true
		return nil, nil
	}
	hg := &hierGate{node: h.Node, rel: collectives.NodeReleaseOf(h.Node), leader: h.Leaders != nil,
		nodes: len(h.Members)}
	if hg.leader {
		hg.lead = newLeadGate(h, hg.rel)
	}
	cc.hgate = hg
	return hg, nil
}

// nodeGated reports whether the node phases of a node-aware Ibarrier with hierarchy h take the node's count: its
// node communicator has one (its members are all on this node), and the table runs its barriers in shared memory
// (or it has one member). The same on every member of the node.
func nodeGated(h *collectives.Hier) bool {
	if h == nil || h.Node == nil || !h.Node.HasRank() || collectives.BarrierGate(h.Node) == nil {
		return false
	}
	if h.Node.Size() == 1 {
		return true
	}
	algo, err := collectives.ChooseNonblocking(h.Node, &collectives.Call{Coll: "barrier"})
	return err == nil && algo == "shm"
}

// start starts member c's Ibarrier without an operation: a member other than its node's leader (arrive), or the
// leader where there are two (lead.go).
func (hg *hierGate) start(c *ranks.Comm) *ranks.Request {
	if hg.lead == nil {
		return hg.arrive(c)
	}
	r, err := hg.lead.start(c)
	if err != nil {
		// Before its arrival: the node's members would wait for a release that never comes.
		h := c.CollRequest()
		ranks.CompleteColl(h, collectives.Broken(c, err))
		return h
	}
	return r
}

// arrive starts the Ibarrier of a member other than its node's leader: it takes the operation id that the leaders'
// ops take on c, arrives at the node's count, and returns a request that waits for the leader's release of it.
func (hg *hierGate) arrive(c *ranks.Comm) *ranks.Request {
	collectives.NextOp(c)
	at, _ := collectives.ArriveBarrier(hg.node)
	r := c.NetGateRequest(hg.rel, at, 0)
	collectives.BarrierRequest(hg.node, r)
	return r
}

// gatedBarrier builds the leader's schedule (hier.go: barrier, when nodeGated): the node's phase, the leaders'
// barrier, the release.
func (hb *hierb) gatedBarrier() error {
	node := hb.h.Node
	g := &gateSub{o: hb.o, node: node, count: collectives.NodeCountOf(node)}
	inline := hb.o.inline
	g.hook = queues.NewHook(func() {
		g.watched.Store(false)
		inline.Wake()
	})
	hb.s.Round()
	hb.s.Run(g)
	hb.o.phases = append(hb.o.phases, phase{c: node, s: &Schedule{}, gate: true})
	if err := hb.phase(hb.h.Leaders, collectives.Call{Coll: "barrier"}); err != nil {
		return err
	}
	hb.s.Round()
	hb.s.Run(&releaseSub{g: g, rel: collectives.NodeReleaseOf(node)})
	hb.o.holdsNode = true
	hb.o.phases = append(hb.o.phases, phase{c: node, s: &Schedule{}, gate: true})
	return nil
}

// gateSub is a node-aware Ibarrier's node phase for its leader: it arrives at the node's count as the op starts
// (Begin runs the first round in the starting call, on the member's goroutine, in the order of its calls), and is
// done once the count is through. Polls may come from any goroutine that runs the op; the count's notify runs hook,
// which runs the op on the notifier's goroutine, as a tiny phase's completion does (op.runInline).
type gateSub struct {
	o       *op
	node    *ranks.Comm
	count   *collectives.NodeCount
	at      uint64
	hook    *queues.Waker
	watched atomic.Bool // hook is listed on the count's event since its last notify
}

// Begin implements Sub.
func (g *gateSub) Begin() error {
	g.at, _ = collectives.ArriveBarrier(g.node)
	collectives.BarrierRequest(g.node, g.o.req)
	g.watched.Store(false)
	return nil
}

// Poll implements Sub.
func (g *gateSub) Poll() (bool, error) {
	if g.count.Reached(g.at) {
		return true, nil
	}
	if !g.watched.Load() {
		g.watched.Store(true)
		g.count.Watch(g.at, 0, g.hook) // wakes the hook at once if the count got there meanwhile
	}
	return false, nil
}

// ready reports whether a Poll would move the phase on (transport.ready).
func (g *gateSub) ready() bool { return g.count.Reached(g.at) }

// releaseSub releases the node's members once the leaders' barrier is through (see above).
type releaseSub struct {
	g   *gateSub
	rel *collectives.NodeRelease
}

// Begin implements Sub.
func (r *releaseSub) Begin() error {
	r.rel.Release(r.g.at)
	return nil
}

// Poll implements Sub.
func (r *releaseSub) Poll() (bool, error) { return true, nil }

// Persistent barriers (BarrierInit) take the way of their communicator's Ibarriers where no member runs an
// operation for them: inside a node (gate.go), and across two nodes (lead.go). Each Start arrives, and the request's
// run waits on the gate, as an Ibarrier's request does (ranks.StartGate). With more nodes the node's leader would
// run an operation, and a persistent one passes its node phases in slots of its own (hier.go: barrier), which the
// members' arrivals would not meet: they all take the operation.
//
// Start and Wait on 2 ranks took 0.20-0.22 us through a slot (tiny.go), now 0.17 (Ibarrier and Wait: 0.11); on 4
// ranks in 2 node processes 1.87-1.91 us through the operation, now 0.74-0.76 (Ibarrier: 0.72-0.75). 3 runs each,
// alternated, the box in its fast state.

// gateStarter is a persistent barrier's starter (ranks.CollStarter) on the gates.
type gateStarter struct {
	c   *ranks.Comm
	cc  *commCache
	hg  *hierGate // across nodes; nil inside a node
	tag int       // the leader's messages: its Init's id on the leaders'
}

// persistentGate returns member c's persistent barrier on the gates, or nil if it takes an operation. Made by
// BarrierInit (collectively: every member of a node decides alike, on what they share).
func persistentGate(c *ranks.Comm, a *collectives.Call) (*ranks.Request, error) {
	if !c.HasRank() || c.Size() == 1 {
		return nil, nil
	}
	algo, err := chooseFor(c, a)
	if err != nil {
		return nil, err
	}
	cc := cacheOf(c)
	p := &gateStarter{c: c, cc: cc}
	switch {
	case algo == "shm" && collectives.BarrierGate(c) != nil:
	case algo == "hier":
		hg, err := hierGateOf(c, cc)
		if err != nil {
			return nil, err
		}
		if hg == nil || hg.nodes != 2 {
			return nil, nil
		}
		p.hg = hg
		if hg.lead != nil {
			p.tag = collectives.Tag(collectives.NextPersistent(hg.lead.leaders), tagBarrier)
		}
	default:
		return nil, nil
	}
	collectives.NextPersistent(c) // as the other ways' Init takes its id
	return c.PersistentCollRequest(p, nil), nil
}

// StartColl implements ranks.CollStarter.
func (p *gateStarter) StartColl(h *ranks.Request) error {
	switch hg := p.hg; {
	case hg == nil:
		bg := barGateOf(p.c, p.cc)
		at, _, tag := bg.arrive(p.c)
		if err := ranks.StartGate(h, bg.gate, at, tag, false); err != nil {
			return collectives.Broken(p.c, err) // arrived: the others would wait for a run nobody waits on
		}
		collectives.BarrierRequest(p.c, h)
	case hg.lead != nil:
		return hg.lead.startRun(h, p.tag)
	default:
		at, _ := collectives.ArriveBarrier(hg.node)
		if err := ranks.StartGate(h, hg.rel, at, 0, true); err != nil {
			return collectives.Broken(p.c, err)
		}
		collectives.BarrierRequest(hg.node, h)
	}
	return nil
}

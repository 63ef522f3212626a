package nbc

import (
	"fmt"

	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/internal/mem"
	"github.com/gompj/gompj/ranks"
)

// Node-aware schedules, for a communicator spread over several nodes with several members on some: an intra-node
// phase, a phase among one leader per node (its lowest rank) over the network, and an intra-node phase again, as
// the blocking node-aware algorithms do (collectives/hier.go). Each phase is a whole operation on the node's or the
// leaders' communicator (a sub-operation: its own schedule, chosen from the table for that communicator, so the
// intra-node phases run in shared memory), started in order by the parent's schedule and run inside the parent op.
// All the phases are built when the operation starts, so that every member takes its sub-communicators' operation
// ids at the same point.

type hierb struct {
	s          *Schedule
	sp         *spec
	c          *ranks.Comm
	o          *op
	h          *collectives.Hier
	persistent bool
	rank, n    int
	mine       int // this member's node index
	leader     bool
	k          int // members on this node
}

// phase builds the operation a on the sub-communicator sc (the node's or the leaders') and adds it to the schedule
// as one step of its own round.
func (hb *hierb) phase(sc *ranks.Comm, a collectives.Call) error {
	hb.s.Round()
	return hb.beside(sc, a)
}

// beside is phase without a round of its own: the operation runs beside the steps of the schedule's current round.
func (hb *hierb) beside(sc *ranks.Comm, a collectives.Call) error {
	algo := ""
	if sc.Size() > 1 {
		var err error
		if algo, err = collectives.ChooseNonblocking(sc, &a); err != nil {
			return err
		}
	}
	var id collectives.OpID
	if hb.persistent {
		id = collectives.NextPersistent(sc)
	} else {
		id = collectives.NextOp(sc)
	}
	if algo == "shm" && !hb.persistent && smallOK(sc, &a) {
		// A small phase on the node: a tiny call (tiny.go), run by the node's last member to arrive; a direct one
		// reads the members' buffers, which are the call's own or the op's and stay as they are until the op has
		// finished, or its next phase has begun, which comes after this one's use is over. A persistent op keeps
		// its shared-memory schedule, whose runs allocate nothing.
		ac := new(collectives.Call)
		*ac = a
		t := &tinySub{o: hb.o, c: sc, a: ac}
		t.sl, t.u = slotFor(sc, cacheOf(sc))
		hb.o.phases = append(hb.o.phases, phase{c: sc, s: &Schedule{}, tiny: t})
		hb.s.Run(t)
		return nil
	}
	s := &Schedule{}
	sp := &spec{algo: algo, rank: sc.Rank(), n: sc.Size(), id: id, a: &a}
	var err error
	switch algo {
	case "shm":
		err = buildShm(s, sp, sc, hb.o, hb.persistent)
	case "hier":
		err = fmt.Errorf("%w: nbc: a node-aware phase cannot be node-aware again", ranks.ErrInternal)
	default:
		err = buildP2P(s, sp)
	}
	if err != nil {
		return err
	}
	sb := &sub{m: Machine{s: s}, tr: newTransport(hb.o, sc, len(s.Steps))}
	sb.m.Reset()
	if hb.persistent {
		if err := sb.tr.makePersistent(s); err != nil {
			return err
		}
	}
	// What reuse needs to give the phase its next id or slot (cache.go); buildShm left the phase's builder in o.shm,
	// which is the op's own shared-memory schedule only for a shared-memory op.
	hb.o.phases = append(hb.o.phases, phase{c: sc, s: s, shm: hb.o.shm})
	hb.o.shm = nil
	hb.s.Run(sb)
	return nil
}

// nodeBlocks returns the leaders' counts and displacements (in bytes) of node blocks of per bytes per member, in
// node-major order.
func (hb *hierb) nodeBlocks(per int) (counts, displs []int) {
	m := len(hb.h.Members)
	counts, displs = make([]int, m), make([]int, m)
	for b, ms := range hb.h.Members {
		counts[b], displs[b] = len(ms)*per, hb.h.Start[b]*per
	}
	return counts, displs
}

// permute moves blocks of blk bytes between rank order (rank r at r*blk) and node-major order; toRank says which
// way.
func (hb *hierb) permute(dst, src []byte, blk int, toRank bool) {
	for b, ms := range hb.h.Members {
		for q, r := range ms {
			nm := (hb.h.Start[b] + q) * blk
			if toRank {
				mem.Copy(dst[r*blk:(r+1)*blk], src[nm:nm+blk])
			} else {
				mem.Copy(dst[nm:nm+blk], src[r*blk:(r+1)*blk])
			}
		}
	}
}

// leaderOf returns the comm rank of the leader of rank r's node.
func (hb *hierb) leaderOf(r int) int { return hb.h.Members[hb.h.NodeIdx[r]][0] }

func buildHier(s *Schedule, sp *spec, c *ranks.Comm, o *op, persistent bool) error {
	h, err := collectives.Hierarchy(c)
	if err != nil {
		return err
	}
	hb := &hierb{s: s, sp: sp, c: c, o: o, h: h, persistent: persistent, rank: sp.rank, n: sp.n,
		mine: h.NodeIdx[sp.rank], leader: h.Leaders != nil, k: h.Node.Size()}
	a := sp.a
	switch a.Coll {
	case "barrier":
		err = hb.barrier()
	case "bcast":
		err = hb.bcast(a.Recv, a.Root)
	case "reduce":
		err = hb.reduce()
	case "allreduce":
		err = hb.allreduce()
	case "gather":
		err = hb.gather()
	case "scatter":
		err = hb.scatter()
	case "allgather":
		err = hb.allgather()
	case "alltoall":
		err = hb.alltoall()
	default:
		err = fmt.Errorf("%w: nbc: no node-aware %s", ranks.ErrArg, a.Coll)
	}
	o.chain = err == nil && hb.chainable()
	return err
}

// chainable reports whether the op just built runs again, for a member that does not lead its node, as a chain of
// its tiny phases' arrivals, without running the op at all (op.chainAgain): its schedule is nothing but those
// phases, the first ones of a kind in which its part is over once it has arrived (a barrier; a reduce's or gather's
// member other than the root, the leader), and the last one the part it waits for (a barrier, a bcast's or
// scatter's reader). The leader's phases among the leaders, and its own phases inside the node, move the chain on:
// the member's last phase completes once its leader, having come through the others, arrives at it. Among 4 ranks
// on 2 node processes, where each process has 1 processor for its 2 ranks, the operation that such a member ran
// took processor time its leader needed.
func (hb *hierb) chainable() bool {
	ps := hb.o.phases
	if hb.leader || hb.persistent || len(ps) == 0 || len(hb.s.Steps) != len(ps) {
		return false
	}
	switch hb.sp.a.Coll {
	case "barrier", "allreduce", "allgather", "alltoall":
	default:
		return false
	}
	for i, p := range ps {
		if p.tiny == nil || hb.s.Steps[i].Kind != StepSub {
			return false
		}
		a, r := p.tiny.a, p.c.Rank()
		switch {
		case a.Coll == "barrier":
		case i < len(ps)-1 && (a.Coll == "reduce" || a.Coll == "gather") && a.Root != r:
		case i == len(ps)-1 && (a.Coll == "bcast" || a.Coll == "scatter") && a.Root != r:
		default:
			return false
		}
	}
	return true
}

func (hb *hierb) barrier() error {
	if !hb.persistent && nodeGated(hb.h) {
		return hb.gatedBarrier()
	}
	if err := hb.phase(hb.h.Node, collectives.Call{Coll: "barrier"}); err != nil {
		return err
	}
	if hb.leader {
		if err := hb.phase(hb.h.Leaders, collectives.Call{Coll: "barrier"}); err != nil {
			return err
		}
	}
	return hb.phase(hb.h.Node, collectives.Call{Coll: "barrier"})
}

func (hb *hierb) bcast(buf []byte, root int) error {
	h := hb.h
	rootNode := h.NodeIdx[root]
	a := hb.sp.a
	call := func(r int) collectives.Call {
		return collectives.Call{Coll: "bcast", Recv: buf, Sz: a.Sz, Root: r}
	}
	if hb.mine == rootNode {
		if err := hb.phase(h.Node, call(h.NodeRank[root])); err != nil {
			return err
		}
	}
	if hb.leader {
		// A root that leads its node sends to the other leaders while its node's members copy from its buffer, as
		// the blocking bcast does (leaderBcastOverlap): both only read the buffer. After the node's phase, the send
		// waited for the slowest member's copy (1 MiB, np 4 on 2 nodes: 1.37x the blocking bcast's time).
		join := hb.phase
		if hb.rank == root {
			join = hb.beside
		}
		if err := join(h.Leaders, call(rootNode)); err != nil {
			return err
		}
	}
	if hb.mine != rootNode {
		return hb.phase(h.Node, call(0))
	}
	return nil
}

// reduce: to each node's leader, among the leaders to the root's leader, which hands the result to the root if
// it is not the root itself (the op must be commutative: the table sees to it).
func (hb *hierb) reduce() error {
	a, h := hb.sp.a, hb.h
	root := a.Root
	rootNode := h.NodeIdx[root]
	total := len(a.Send)
	red := func(send, recv []byte, r int) collectives.Call {
		return collectives.Call{Coll: "reduce", Send: send, Recv: recv, Sz: a.Sz, Root: r, Kernel: a.Kernel,
			Commutative: a.Commutative}
	}
	var tmp []byte
	if hb.leader {
		tmp = hb.s.scratch(total)
	}
	if err := hb.phase(h.Node, red(a.Send, tmp, 0)); err != nil {
		return err
	}
	rootLeads := h.NodeRank[root] == 0
	b := hb.sp.p2p(hb.s)
	if hb.leader {
		out := tmp
		if hb.rank == root {
			out = a.Recv[:total]
		}
		if err := hb.phase(h.Leaders, red(tmp, out, rootNode)); err != nil {
			return err
		}
		if hb.mine == rootNode && !rootLeads {
			hb.s.Round()
			b.send(out, root, tagHier)
		}
		return nil
	}
	if hb.rank == root && !rootLeads {
		hb.s.Round()
		b.recv(a.Recv[:total], hb.leaderOf(root), tagHier)
	}
	return nil
}

// allreduce: reduce to each node's leader, allreduce among leaders, bcast inside each node.
func (hb *hierb) allreduce() error {
	a, h := hb.sp.a, hb.h
	total := len(a.Send)
	acc := a.Recv[:total]
	if err := hb.phase(h.Node, collectives.Call{Coll: "reduce", Send: a.Send, Recv: acc, Sz: a.Sz, Root: 0,
		Kernel: a.Kernel, Commutative: a.Commutative}); err != nil {
		return err
	}
	if hb.leader {
		if err := hb.phase(h.Leaders, collectives.Call{Coll: "allreduce", Send: acc, Recv: acc, Sz: a.Sz,
			InPlace: true, Kernel: a.Kernel, Commutative: a.Commutative}); err != nil {
			return err
		}
	}
	return hb.phase(h.Node, collectives.Call{Coll: "bcast", Recv: acc, Sz: a.Sz})
}

// gather (equal blocks): to each node's leader, node blocks among the leaders to the root's leader, which puts
// them in rank order and hands them to the root if it is not the root itself.
func (hb *hierb) gather() error {
	a, h := hb.sp.a, hb.h
	n, blk, root := hb.n, a.Blk, a.Root
	rootNode := h.NodeIdx[root]
	rootLeads := h.NodeRank[root] == 0
	own := a.Send
	if a.InPlace {
		own = a.Recv[root*blk : (root+1)*blk]
	}
	var nb []byte
	if hb.leader {
		nb = hb.s.scratch(hb.k * blk)
	}
	if err := hb.phase(h.Node, collectives.Call{Coll: "gather", Send: own, Recv: nb, Blk: blk, Sz: 1}); err != nil {
		return err
	}
	b := hb.sp.p2p(hb.s)
	if hb.leader {
		counts, displs := hb.nodeBlocks(blk)
		var all []byte
		if hb.mine == rootNode {
			all = hb.s.scratch(n * blk)
		}
		if err := hb.phase(h.Leaders, collectives.Call{Coll: "gatherv", Send: nb, Recv: all, Counts: counts,
			Displs: displs, Sz: 1, Root: rootNode}); err != nil {
			return err
		}
		if hb.mine == rootNode {
			var out []byte
			if hb.rank == root {
				out = a.Recv[:n*blk]
			} else {
				out = hb.s.scratch(n * blk)
			}
			hb.s.Round()
			hb.s.Do(func() error { hb.permute(out, all, blk, true); return nil })
			if hb.rank != root {
				b.send(out, root, tagHier)
			}
		}
		return nil
	}
	if hb.rank == root && !rootLeads {
		hb.s.Round()
		b.recv(a.Recv[:n*blk], hb.leaderOf(root), tagHier)
	}
	return nil
}

// scatter (equal blocks): the root hands its send to its node's leader (unless it leads), which scatters node
// blocks among the leaders; each leader scatters its node's blocks inside the node.
func (hb *hierb) scatter() error {
	a, h := hb.sp.a, hb.h
	n, blk, root := hb.n, a.Blk, a.Root
	rootNode := h.NodeIdx[root]
	rootLeads := h.NodeRank[root] == 0
	b := hb.sp.p2p(hb.s)
	var recv []byte
	if !a.InPlace {
		recv = a.Recv[:blk]
	} else if !hb.leader {
		recv = hb.s.scratch(blk) // an in-place root that does not lead: its block is where it was
	}
	if hb.rank == root && !rootLeads {
		hb.s.Round()
		b.send(a.Send[:n*blk], hb.leaderOf(root), tagHier)
	}
	var nb []byte
	if hb.leader {
		nb = hb.s.scratch(hb.k * blk)
		var all []byte
		if hb.mine == rootNode {
			all = hb.s.scratch(n * blk)
			from := a.Send
			if hb.rank != root {
				from = hb.s.scratch(n * blk)
				hb.s.Round()
				b.recv(from, root, tagHier)
			}
			hb.s.Round()
			hb.s.Do(func() error { hb.permute(all, from, blk, false); return nil })
		}
		counts, displs := hb.nodeBlocks(blk)
		if err := hb.phase(h.Leaders, collectives.Call{Coll: "scatterv", Send: all, Recv: nb, Counts: counts,
			Displs: displs, Sz: 1, Root: rootNode}); err != nil {
			return err
		}
	}
	c := collectives.Call{Coll: "scatter", Send: nb, Recv: recv, Blk: blk, Sz: 1, Root: 0}
	if recv == nil {
		c.InPlace = true
	}
	return hb.phase(h.Node, c)
}

// allgather (equal blocks): gather each node's blocks at its leader, allgather the node blocks among leaders, put
// them in rank order, bcast inside each node.
func (hb *hierb) allgather() error {
	a, h := hb.sp.a, hb.h
	n, blk := hb.n, a.Blk
	own := a.Send
	if a.InPlace {
		own = a.Recv[hb.rank*blk : (hb.rank+1)*blk]
	}
	var nb []byte
	if hb.leader {
		nb = hb.s.scratch(hb.k * blk)
	}
	if err := hb.phase(h.Node, collectives.Call{Coll: "gather", Send: own, Recv: nb, Blk: blk, Sz: 1}); err != nil {
		return err
	}
	recv := a.Recv[:n*blk]
	if hb.leader {
		counts, displs := hb.nodeBlocks(blk)
		all := hb.s.scratch(n * blk)
		if err := hb.phase(h.Leaders, collectives.Call{Coll: "allgatherv", Send: nb, Recv: all, Counts: counts,
			Displs: displs, Sz: 1}); err != nil {
			return err
		}
		hb.s.Round()
		hb.s.Do(func() error { hb.permute(recv, all, blk, true); return nil })
	}
	return hb.phase(h.Node, collectives.Call{Coll: "bcast", Recv: recv, Sz: 1})
}

// alltoall (equal blocks): each node's leader gathers its members' send buffers, packs for every other node what
// its members send to that node's members, exchanges one message per pair of nodes with the other leaders, builds
// its members' receive buffers and scatters them.
func (hb *hierb) alltoall() error {
	a, h := hb.sp.a, hb.h
	n, blk, k := hb.n, a.Blk, hb.k
	send := a.Send
	if a.InPlace {
		send = hb.s.scratch(n * blk) // the blocks to send, copied when the operation starts
		hb.s.Copy(send, a.Recv[:n*blk])
	}
	var g, rb []byte // at the leader: every member's send buffer, then every member's receive buffer
	if hb.leader {
		g, rb = hb.s.scratch(k*n*blk), hb.s.scratch(k*n*blk)
	}
	if err := hb.phase(h.Node, collectives.Call{Coll: "gather", Send: send[:n*blk], Recv: g, Blk: n * blk,
		Sz: 1}); err != nil {
		return err
	}
	if hb.leader {
		m := len(h.Members)
		local := h.Members[hb.mine]
		sc, sd, rc, rd := make([]int, m), make([]int, m), make([]int, m), make([]int, m)
		so, ro := 0, 0
		for b, ms := range h.Members {
			if b != hb.mine {
				sc[b], rc[b] = k*len(ms)*blk, len(ms)*k*blk
			}
			sd[b], rd[b] = so, ro
			so += sc[b]
			ro += rc[b]
		}
		sbuf, rbuf := hb.s.scratch(so), hb.s.scratch(ro)
		hb.s.Round()
		hb.s.Do(func() error {
			// for node b: member j's blocks for b's members, member by member
			for b, ms := range h.Members {
				if b == hb.mine {
					continue
				}
				off := sd[b]
				for j := 0; j < k; j++ {
					for _, q := range ms {
						off += mem.Copy(sbuf[off:off+blk], g[(j*n+q)*blk:])
					}
				}
			}
			// blocks between members of this node
			for qi, q := range local {
				for j, src := range local {
					mem.Copy(rb[(qi*n+src)*blk:(qi*n+src+1)*blk], g[(j*n+q)*blk:(j*n+q+1)*blk])
				}
			}
			return nil
		})
		if err := hb.phase(h.Leaders, collectives.Call{Coll: "alltoallv", Send: sbuf, Recv: rbuf, Counts: sc,
			Displs: sd, RCounts: rc, RDispls: rd, Sz: 1}); err != nil {
			return err
		}
		hb.s.Round()
		hb.s.Do(func() error {
			// from node b's member a (its a-th) to this node's member qi: at rd[b] + (a*k + qi)*blk
			for b, ms := range h.Members {
				if b == hb.mine {
					continue
				}
				for ai, src := range ms {
					for qi := range local {
						off := rd[b] + (ai*k+qi)*blk
						mem.Copy(rb[(qi*n+src)*blk:(qi*n+src+1)*blk], rbuf[off:off+blk])
					}
				}
			}
			return nil
		})
	}
	return hb.phase(h.Node, collectives.Call{Coll: "scatter", Send: rb, Recv: a.Recv[:n*blk], Blk: n * blk, Sz: 1})
}

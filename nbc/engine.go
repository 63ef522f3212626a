package nbc

import (
	"fmt"

	"github.com/gompj/gompj/internal/mem"
	"github.com/gompj/gompj/queues"
	"github.com/gompj/gompj/ranks"
)

// The schedule engine: a pure state machine, as etcd's raft is. It decides what to do next and never does any I/O
// itself: a Transport posts the communication steps it asks for and tells it when they have completed. So the
// engine runs the same under the real runtime (transport.go), where steps are requests on the communicator's
// collective context, shared-memory conditions and sub-operations, and under unit tests, where a fake transport
// delivers completions in any order.
//
// A schedule is a list of rounds. A round runs its local steps (copies, reductions, functions) in order, then posts
// its communication steps (sends, receives, waits on a shared-memory condition, sub-operations) all at once, and
// is over when every one of them has completed, except detached ones, which need only complete before the
// operation does. The blocking algorithms, cut at their waits, are schedules: a blocking sendrecv followed by a
// reduction becomes a round with a send and a receive, and the reduction opens the next round.

// StepKind is what a step does.
type StepKind uint8

const (
	// communication steps, posted through the Transport
	StepSend    StepKind = iota + 1 // send Buf to Peer with Tag
	StepRecv                        // receive into Buf from Peer with Tag
	StepSendObj                     // send the value Obj (msgpack) to Peer with Tag
	StepRecvObj                     // receive a value into the pointer Obj from Peer with Tag
	StepWait                        // wait until Cond() holds (shared-memory protocols)
	StepSub                         // run the sub-operation Sub (a phase of a node-aware algorithm)
	StepSendMem                     // send the typed memory Mem to Peer with Tag (a View's window included)
	StepRecvMem                     // receive into the typed memory Mem from Peer with Tag
	// local steps, run by the engine
	StepCopy        // mem.Copy(Buf, Src)
	StepReduceLeft  // Buf = Src op Buf (Src from lower ranks)
	StepReduceRight // Buf = Buf op Src (Src from higher ranks); Src is clobbered if the op is not commutative
	StepFunc        // Fn()
)

func (k StepKind) local() bool { return k >= StepCopy }

var stepNames = [...]string{"?", "send", "recv", "send-object", "recv-object", "wait", "sub", "send-mem",
	"recv-mem", "copy", "reduce-left", "reduce-right", "func"}

func (k StepKind) String() string {
	if int(k) < len(stepNames) {
		return stepNames[k]
	}
	return fmt.Sprintf("step(%d)", k)
}

// Kernel combines two equally long byte ranges of whole elements: inout = in op inout, element-wise.
type Kernel func(inout, in []byte)

// Step is one step of a schedule.
type Step struct {
	Kind     StepKind
	Detached bool // a communication step the round does not wait for (the operation does)
	Commute  bool // reductions: the op is commutative
	Peer     int
	Tag      int
	Base     int // the part of Tag that is the same in every operation of the schedule (see op.retarget)
	Buf      []byte
	Src      []byte
	Obj      any
	Mem      ranks.Mem // StepSendMem, StepRecvMem
	K        Kernel
	Fn       func() error
	Cond     func() bool
	List     *watchlist     // a wait step: the list through which whoever makes Cond true wakes its operation
	Soon     *queues.Policy // a wait step that the others are about to end: how its run spins on it (WaitSoon)
	Sub      Sub
}

// Sub is a sub-operation a step runs: a whole operation on another communicator (a node-aware algorithm's phase).
// The Transport starts it and polls it; the engine only sees it as a step that completes.
type Sub interface {
	// Begin starts the sub-operation (again, for a persistent one).
	Begin() error
	// Poll advances it and reports whether it has completed, and with what error.
	Poll() (done bool, err error)
}

// Schedule is a list of rounds of steps, built once (for a persistent operation) or per call.
type Schedule struct {
	Steps  []Step
	rounds []int32 // rounds[r] is the index of round r's first step
	// comm reports whether the last round has a communication step: a local step after one opens a round
	comm bool
	held []*[]byte // scratch buffers from the pools (scratch.go)
	// shape is 0 until the first machine on the schedule looks: then shapeWaits if every step is a local one or a
	// wait (a shared-memory operation's), else shapeRounds.
	shape int8
	// subs: some step is a sub-operation (collect polls those of a round beside its first pending step)
	subs bool
}

const (
	shapeRounds int8 = iota + 1
	shapeWaits
)

// waitsOnly reports whether every step of s is a local step or a wait on a shared-memory condition.
func (s *Schedule) waitsOnly() bool {
	if s.shape == 0 {
		s.shape = shapeWaits
		for i := range s.Steps {
			if k := s.Steps[i].Kind; !k.local() && k != StepWait {
				s.shape = shapeRounds
				break
			}
		}
	}
	return s.shape == shapeWaits
}

// Round ends the current round: the next step opens a new one. Empty rounds are never made.
func (s *Schedule) Round() {
	if len(s.rounds) == 0 || int(s.rounds[len(s.rounds)-1]) < len(s.Steps) {
		s.rounds = append(s.rounds, int32(len(s.Steps)))
	}
	s.comm = false
}

func (s *Schedule) add(st Step) {
	if len(s.rounds) == 0 || (st.Kind.local() && s.comm) {
		s.rounds = append(s.rounds, int32(len(s.Steps)))
		s.comm = false
	}
	if !st.Kind.local() {
		s.comm = true
	}
	if st.Kind == StepSub {
		s.subs = true
	}
	s.Steps = append(s.Steps, st)
}

// Send adds a send of buf to peer; the round waits for it.
func (s *Schedule) Send(buf []byte, peer, tag int) {
	s.add(Step{Kind: StepSend, Buf: buf, Peer: peer, Tag: tag})
}

// SendDetached adds a send that only the operation's end waits for: buf must not change until then.
func (s *Schedule) SendDetached(buf []byte, peer, tag int) {
	s.add(Step{Kind: StepSend, Detached: true, Buf: buf, Peer: peer, Tag: tag})
}

// Recv adds a receive into buf from peer.
func (s *Schedule) Recv(buf []byte, peer, tag int) {
	s.add(Step{Kind: StepRecv, Buf: buf, Peer: peer, Tag: tag})
}

// SendMem adds a send of typed memory: the receiver sees its element type (ErrType on a mismatch), and a View's
// window goes in pieces where the path allows.
func (s *Schedule) SendMem(m ranks.Mem, peer, tag int) {
	s.add(Step{Kind: StepSendMem, Mem: m, Peer: peer, Tag: tag})
}

// RecvMem adds a receive into typed memory.
func (s *Schedule) RecvMem(m ranks.Mem, peer, tag int) {
	s.add(Step{Kind: StepRecvMem, Mem: m, Peer: peer, Tag: tag})
}

// SendObj adds a send of the value obj (encoded when the step is posted).
func (s *Schedule) SendObj(obj any, peer, tag int) {
	s.add(Step{Kind: StepSendObj, Obj: obj, Peer: peer, Tag: tag})
}

// RecvObj adds a receive of a value into the pointer obj.
func (s *Schedule) RecvObj(obj any, peer, tag int) {
	s.add(Step{Kind: StepRecvObj, Obj: obj, Peer: peer, Tag: tag})
}

// Wait adds a wait for cond, a shared-memory condition that someone else makes true and then notifies list.
func (s *Schedule) Wait(cond func() bool, list *watchlist) {
	s.add(Step{Kind: StepWait, Cond: cond, List: list})
}

// WaitSoon is Wait for a condition that the other members are likely to make true within microseconds (they have
// all arrived and do their shares, or are arriving): the run that posts it spins on it as p says before it waits
// as for any other (transport.Post).
func (s *Schedule) WaitSoon(cond func() bool, list *watchlist, p *queues.Policy) {
	s.add(Step{Kind: StepWait, Cond: cond, List: list, Soon: p})
}

// Run adds a sub-operation.
func (s *Schedule) Run(sub Sub) { s.add(Step{Kind: StepSub, Sub: sub}) }

// Copy adds mem.Copy(dst, src).
func (s *Schedule) Copy(dst, src []byte) { s.add(Step{Kind: StepCopy, Buf: dst, Src: src}) }

// ReduceLeft adds acc = in op acc, for in from lower ranks than acc's.
func (s *Schedule) ReduceLeft(k Kernel, acc, in []byte) {
	s.add(Step{Kind: StepReduceLeft, K: k, Buf: acc, Src: in})
}

// ReduceRight adds acc = acc op in, for in from higher ranks than acc's; in is clobbered unless commutative.
func (s *Schedule) ReduceRight(k Kernel, commutative bool, acc, in []byte) {
	s.add(Step{Kind: StepReduceRight, K: k, Commute: commutative, Buf: acc, Src: in})
}

// Do adds a local function.
func (s *Schedule) Do(fn func() error) { s.add(Step{Kind: StepFunc, Fn: fn}) }

// Rounds is the number of rounds.
func (s *Schedule) Rounds() int { return len(s.rounds) }

// round returns the steps [lo, hi) of round r.
func (s *Schedule) round(r int) (lo, hi int) {
	lo = int(s.rounds[r])
	hi = len(s.Steps)
	if r+1 < len(s.rounds) {
		hi = int(s.rounds[r+1])
	}
	return lo, hi
}

// Transport carries out a schedule's communication steps for the engine.
type Transport interface {
	// Post starts communication step i. An error fails the step (and the operation) at once.
	Post(i int, st *Step) error
	// Test reports whether posted step i has completed, and with what error. It must not block.
	Test(i int, st *Step) (done bool, err error)
}

// Machine runs one schedule. Reset makes it ready to run the schedule again (persistent operations). A Machine is
// not safe for concurrent use: the caller serialises Progress (see op.go).
type Machine struct {
	s       *Schedule
	round   int   // the current round
	posted  bool  // the current round's steps are posted
	inround []int // the current round's posted steps, in posting order
	head    int   // inround[:head] have been seen complete
	det     []int // detached steps posted and not yet seen complete
	err     error
	done    bool
	next    int // the first step of the schedule not yet run or posted (rounds only)
	// A schedule of local steps and waits only runs step by step (progressSteps): pc is the next step, and posted
	// says that it is a wait already posted.
	steps bool
	pc    int
}

// NewMachine returns a machine ready to run s.
func NewMachine(s *Schedule) *Machine {
	m := &Machine{s: s}
	m.Reset()
	return m
}

// Reset makes the machine ready to run its schedule from the start. It keeps its memory.
func (m *Machine) Reset() {
	m.round, m.posted, m.head, m.err, m.done, m.pc, m.next = 0, false, 0, nil, false, 0, 0
	m.steps = m.s.waitsOnly()
	m.det = m.det[:0]
	m.inround = m.inround[:0]
}

// Done reports whether the operation has finished, and with what error.
func (m *Machine) Done() (bool, error) { return m.done, m.err }

// Progress advances the schedule as far as it can without blocking: it runs local steps, posts communication
// steps and collects completions through t. It reports whether the operation has finished, and its first error.
// After an error no new round starts, but the operation finishes only once every posted step has completed, so
// that no transfer into or out of the caller's buffers is still under way when it returns.
func (m *Machine) Progress(t Transport) (bool, error) {
	if m.steps {
		return m.progressSteps(t)
	}
	for !m.done {
		if m.round < len(m.s.rounds) && m.err == nil {
			if !m.posted {
				m.start(t)
				continue
			}
			if !m.collect(t) {
				return false, nil
			}
			m.round++
			m.posted = false
			continue
		}
		// the end (or an error): wait for whatever is still posted
		if m.posted && !m.collect(t) {
			return false, nil
		}
		m.posted = false
		if !m.collectDetached(t) {
			return false, nil
		}
		m.done = true
		if _, owed := m.err.(*OwedError); m.err != nil && !owed && m.owes() {
			m.err = &OwedError{Err: m.err}
		}
	}
	return true, m.err
}

// OwedError is the error of an operation that failed before it posted all its message steps: the peers of those
// steps wait on this rank for ever (a send they never get, a rendezvous send never received), so whoever completes
// the operation ends the job (collectives.Broken, op.end). A failure whose later steps talk to nobody (a leaf of a
// bcast tree) is left as it is, and the job goes on.
type OwedError struct{ Err error }

func (e *OwedError) Error() string { return e.Err.Error() }
func (e *OwedError) Unwrap() error { return e.Err }

// owes reports whether a step the machine never got to (it failed first) would have sent to or received from
// another rank, or run a phase with others (a sub-operation).
func (m *Machine) owes() bool {
	for i := m.next; i < len(m.s.Steps); i++ {
		switch m.s.Steps[i].Kind {
		case StepSend, StepRecv, StepSendObj, StepRecvObj, StepSendMem, StepRecvMem, StepSub:
			return true
		}
	}
	return false
}

// progressSteps is Progress for a schedule of local steps and waits only (a shared-memory operation's). It runs the
// steps one by one in order, which comes to the same as running them by rounds: a round's local steps come before
// its waits (Schedule.add), and a wait does nothing but join a list and test its condition (a condition may do the
// work it waits for, as an alltoall's moves, which it does again at every test), so posting a round's waits one at a
// time, each once the one before holds, changes nothing but when the later ones join their lists. It skips the
// rounds' bookkeeping, most of the cost of a small shared-memory operation's run. A local step's error ends the
// operation at once: nothing is posted then.
func (m *Machine) progressSteps(t Transport) (bool, error) {
	for m.pc < len(m.s.Steps) {
		st := &m.s.Steps[m.pc]
		if st.Kind != StepWait {
			if err := runLocal(st); err != nil {
				m.fail(err)
				break
			}
			m.pc++
			continue
		}
		if !m.posted {
			if err := t.Post(m.pc, st); err != nil {
				m.fail(err)
				break
			}
			m.posted = true
		}
		ok, err := t.Test(m.pc, st)
		if !ok {
			return false, nil
		}
		m.posted = false
		m.pc++
		if err != nil { // as collect: the failed step is done, and no step after it runs
			m.fail(err)
			break
		}
	}
	m.done, m.posted = true, false
	return true, m.err
}

func (m *Machine) fail(err error) {
	if m.err == nil {
		m.err = err
	}
}

// start runs round m.round's local steps and posts its communication steps.
func (m *Machine) start(t Transport) {
	lo, hi := m.s.round(m.round)
	m.posted, m.head = true, 0
	m.inround = m.inround[:0]
	for i := lo; i < hi; i++ {
		st := &m.s.Steps[i]
		m.next = i
		if st.Kind.local() { // a round's local steps come before its communication steps (Schedule.add)
			if err := runLocal(st); err != nil {
				m.fail(err)
				return
			}
			continue
		}
		if err := t.Post(i, st); err != nil {
			m.fail(err)
			return // steps before i are posted: collect waits for them (they are in [cur, i))
		}
		if st.Detached {
			m.det = append(m.det, i)
		} else {
			m.inround = append(m.inround, i)
		}
	}
	m.next = hi
}

// Pending returns the first posted step the operation waits for, the one whose completion must come before it can
// move on (steps are collected in posting order, detached ones after the rounds, from the last posted), and its
// index; -1 if there is none (the machine is done, or has a round to start).
func (m *Machine) Pending() (int, *Step) {
	if m.done {
		return -1, nil
	}
	if m.steps {
		if m.posted {
			return m.pc, &m.s.Steps[m.pc]
		}
		return -1, nil
	}
	if m.posted && m.head < len(m.inround) {
		i := m.inround[m.head]
		return i, &m.s.Steps[i]
	}
	if (m.round >= len(m.s.rounds) || m.err != nil) && len(m.det) > 0 {
		i := m.det[len(m.det)-1]
		return i, &m.s.Steps[i]
	}
	return -1, nil
}

// collect checks the current round's posted steps and reports whether all have completed. Steps are checked in
// posting order and the walk stops at the first one still pending: the round waits for it anyway, so the cost of
// a round of n steps is O(n) over all calls, not per call. A sub-operation, though, moves only when it is polled:
// those after the first pending step are polled too, so that the phases of a round run beside each other (a
// node-aware bcast's root sends to the other leaders while its node's members copy from its buffer; stopped at
// the node's phase, the send waited for the slowest copy, and the 1 MiB Ibcast on 4 ranks in 2 node processes
// took 1.35x the blocking bcast's time).
func (m *Machine) collect(t Transport) bool {
	for ; m.head < len(m.inround); m.head++ {
		i := m.inround[m.head]
		ok, err := t.Test(i, &m.s.Steps[i])
		if !ok {
			if m.s.subs {
				for _, j := range m.inround[m.head+1:] {
					if st := &m.s.Steps[j]; st.Kind == StepSub {
						t.Test(j, st) // its outcome is collected when the walk gets to it
					}
				}
			}
			return false
		}
		if err != nil {
			m.fail(err)
		}
	}
	return true
}

// collectDetached checks the detached steps posted so far and reports whether all have completed.
func (m *Machine) collectDetached(t Transport) bool {
	for len(m.det) > 0 {
		i := m.det[len(m.det)-1]
		ok, err := t.Test(i, &m.s.Steps[i])
		if !ok {
			return false
		}
		if err != nil {
			m.fail(err)
		}
		m.det = m.det[:len(m.det)-1]
	}
	return true
}

func runLocal(st *Step) error {
	switch st.Kind {
	case StepCopy:
		mem.Copy(st.Buf, st.Src)
	case StepReduceLeft:
		st.K(st.Buf, st.Src)
	case StepReduceRight:
		if st.Commute {
			st.K(st.Buf, st.Src)
		} else {
			st.K(st.Src, st.Buf)
			mem.Copy(st.Buf, st.Src)
		}
	case StepFunc:
		return st.Fn()
	default:
		return fmt.Errorf("nbc: %v is not a local step", st.Kind)
	}
	return nil
}

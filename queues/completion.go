package queues

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

const (
	statePending uint32 = iota
	stateDone
	stateParked // pending, and a waiter may be parked on the waker
)

// Completion is a one-shot flag set by whoever finishes an operation and waited on by the rank that started it.
// Reset makes it reusable (pooled requests).
//
// A completion has one Waker armed at a time: a parked waiter's, a hook (NewHook) that runs a function on the
// goroutine that completes it (OnComplete), or, when several goroutines park on it at once, a fan that wakes them
// all (setWaker). A nonblocking collective arms its hook on its child requests, which nobody else waits on, so that
// a child's completion drives the collective on at once. The completion stays two words, so a Request's first cache
// line keeps it. A signal that many goroutines wait for, again and again, is an Event.
type Completion struct {
	state atomic.Uint32
	waker atomic.Pointer[Waker]
}

// Done reports whether Complete has been called.
func (c *Completion) Done() bool { return c.state.Load() == stateDone }

// Complete sets the flag and wakes a parked waiter. Callers must not touch the operation's state afterwards: the
// waiter may reuse it at once.
//
// It inlines, the wake-up kept out of line, so that the swap is the caller's first access to the completion's line:
// the nil check of a call's receiver reads the line, and a completer on another core then paid two transfers of
// it, the read and the swap's upgrade (an 8-byte Iallreduce's completer, 2 ranks: a fifth of its start's samples).
func (c *Completion) Complete() {
	if c.state.Swap(stateDone) == stateParked {
		c.wake()
	}
}

// wake wakes the parked waiter of a completion just done.
func (c *Completion) wake() {
	if w := c.waker.Load(); w != nil {
		w.Wake()
	}
}

// Reset makes the flag pending again. Only for a completion nobody else can still see. It stores only what is not
// reset already: an atomic store is a locked exchange, a fence, and a barrier's run (ranks.GateRequest) leaves its
// flag pending for the next run to take.
func (c *Completion) Reset() {
	if c.state.Load() != statePending {
		c.state.Store(statePending)
	}
	if c.waker.Load() != nil {
		c.waker.Store(nil)
	}
}

// Unwatched reports whether nothing is armed on c: no waiter has parked on it, and no hook. A done completion that
// nobody watched can be reset for reuse with no wake-up of its last run still to come.
func (c *Completion) Unwatched() bool { return c.waker.Load() == nil }

// arm registers w to be woken on completion; it returns false if the completion is already done.
func (c *Completion) arm(w *Waker) bool {
	c.setWaker(w)
	for {
		s := c.state.Load()
		if s == stateDone {
			return false
		}
		if c.state.CompareAndSwap(s, stateParked) {
			return true
		}
	}
}

// setWaker makes w the waker of c. A hook replaces what was there (OnComplete's contract). A parked waiter joins any
// other parked waiter instead: two goroutines may wait on one request at once (two Waitany over the same requests,
// MPI_THREAD_MULTIPLE), and if the second displaced the first, the first would sleep through the completion and,
// once the second had reported it, never wake. Contention turns the waker into a fan, allocated then only.
func (c *Completion) setWaker(w *Waker) {
	for {
		old := c.waker.Load()
		switch {
		case old == w:
			return
		case old == nil || w.fn != nil:
			if c.waker.CompareAndSwap(old, w) {
				return
			}
		case old.fan != nil:
			old.fan.add(w)
			return
		default:
			if c.waker.CompareAndSwap(old, newFan(old, w)) {
				return
			}
		}
	}
}

// OnComplete arms hook h (made by NewHook) on c: h's function runs once, on the goroutine that completes c. It
// returns false, and arms nothing, if c is already done: the caller sees the completion itself. Whatever was armed
// on c before is replaced, so c must have no waiter of its own.
func (c *Completion) OnComplete(h *Waker) bool { return c.arm(h) }

// Waker parks a goroutine until some completion it armed fires. Tokens are idempotent, so spurious wake-ups are
// possible and every waiter re-checks its condition. A hook is a Waker that runs a function instead.
type Waker struct {
	ch  chan struct{}
	fn  func()
	fan *fan // set on a fan's own waker
}

// fan is the waker of a completion that several goroutines wait on: it wakes them all. The list only grows until
// the completion is reset (which drops the fan); a waker in it whose goroutine has left is woken spuriously, which
// waiters allow for. Adds copy the list, so that waking reads a snapshot without the lock.
type fan struct {
	mu   sync.Mutex
	list atomic.Pointer[[]*Waker]
}

func newFan(a, b *Waker) *Waker {
	f := &fan{}
	l := []*Waker{a, b}
	f.list.Store(&l)
	return &Waker{fn: f.wake, fan: f}
}

func (f *fan) add(w *Waker) {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := *f.list.Load()
	for _, x := range old {
		if x == w {
			return
		}
	}
	l := append(old[:len(old):len(old)], w)
	f.list.Store(&l)
}

func (f *fan) wake() {
	for _, w := range *f.list.Load() {
		w.Wake()
	}
}

// NewHook returns a Waker that runs fn whenever it is woken, on the waking goroutine. fn must be quick and must
// not block: it runs inside whatever completed the operation (a sender, the network's progress loop).
func NewHook(fn func()) *Waker { return &Waker{fn: fn} }

// Wake wakes the goroutine parked on w, if any, or runs w's hook function.
func (w *Waker) Wake() {
	if w.fn != nil {
		w.fn()
		return
	}
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

var wakers = sync.Pool{New: func() any { return &Waker{ch: make(chan struct{}, 1)} }}

// GetWaker returns a pooled waker; PutWaker gives it back.
func GetWaker() *Waker  { return wakers.Get().(*Waker) }
func PutWaker(w *Waker) { wakers.Put(w) }

// Park blocks until w is woken or abort is closed; it reports false on abort.
func (w *Waker) Park(abort <-chan struct{}) bool {
	select {
	case <-w.ch:
		return true
	case <-abort:
		return false
	}
}

// parkStop is Park that also returns false once stop is closed.
func (w *Waker) parkStop(abort, stop <-chan struct{}) bool {
	select {
	case <-w.ch:
		return true
	case <-abort:
		return false
	case <-stop:
		return false
	}
}

// Policy says how a rank waits: spin on the flag for Spin, then yield the processor Yields times, then park.
// With a Driver, the waiter drives it (Enter, Poll between checks, Leave) while it spins and yields.
type Policy struct {
	Spin   time.Duration
	Yields int
	Driver Driver
}

// Driver is a progress engine a waiting rank can run itself: a network device (device.Poller has this method set).
type Driver interface {
	Enter()
	Poll() bool
	Leave(parking bool)
}

// Driven returns p with d as its driver.
func (p Policy) Driven(d Driver) Policy {
	p.Driver = d
	return p
}

// DefaultPolicy spins only when every local rank can have a core of its own.
func DefaultPolicy(localRanks int) Policy {
	if localRanks <= runtime.GOMAXPROCS(0) {
		return Policy{Spin: 50 * time.Microsecond, Yields: 50}
	}
	return Policy{Spin: 0, Yields: 10}
}

func (p *Policy) spin(cond func() bool) bool {
	if cond() {
		return true
	}
	if p.Driver != nil {
		return p.spinDriven(cond)
	}
	if p.Spin > 0 {
		var deadline time.Time
		for i := 1; ; i++ {
			if cond() {
				return true
			}
			if i&127 == 0 {
				now := time.Now()
				if deadline.IsZero() {
					deadline = now.Add(p.Spin)
				} else if now.After(deadline) {
					break
				}
			}
		}
	}
	for i := 0; i < p.Yields; i++ {
		runtime.Gosched()
		if cond() {
			return true
		}
	}
	return false
}

// spinDriven is spin with a driver: a system call to poll the device between short bursts of checks.
func (p *Policy) spinDriven(cond func() bool) bool {
	d := p.Driver
	d.Enter()
	if p.Spin > 0 {
		// The clock is read every 16th round only, and first after 16 rounds: on a VM a clock read can cost more
		// than a round of polling, and most waits end before the first one.
		var deadline time.Time
		for round := 1; ; round++ {
			d.Poll()
			for i := 0; i < 32; i++ {
				if cond() {
					d.Leave(false)
					return true
				}
			}
			if round&15 == 0 {
				now := time.Now()
				if deadline.IsZero() {
					deadline = now.Add(p.Spin)
				} else if now.After(deadline) {
					break
				}
			}
		}
	}
	for i := 0; i < p.Yields; i++ {
		d.Poll()
		if cond() {
			d.Leave(false)
			return true
		}
		runtime.Gosched()
	}
	d.Leave(true)
	return cond()
}

// Wait waits for c per the policy. It reports false if abort was closed first.
func (c *Completion) Wait(p *Policy, abort <-chan struct{}) bool {
	return c.WaitHelp(p, abort, nil)
}

// WaitHelp is Wait that, while it spins without a driver, calls help (if not nil) between rounds of looks: help may
// do a share of the work the completion waits for (a large copy into the waiter's buffer that the completer shares
// out, ranks' coop.go), on a core that would otherwise only spin.
func (c *Completion) WaitHelp(p *Policy, abort <-chan struct{}, help func()) bool {
	if c.state.Load() == stateDone {
		return true
	}
	if p.Driver != nil {
		if p.spinDriven(c.Done) {
			return true
		}
	} else if p.Spin > 0 {
		// The hot loop: nothing but the load, checking the clock only now and then, and first only after a round
		// of loads: most waits of a busy exchange end within it, and a clock read (tens of ns on a VM) on the way
		// in would delay seeing the completion.
		var deadline time.Time
		for {
			for i := 0; i < 256; i++ {
				if c.state.Load() == stateDone {
					return true
				}
			}
			if help != nil {
				help()
			}
			now := time.Now()
			if deadline.IsZero() {
				deadline = now.Add(p.Spin)
			} else if now.After(deadline) {
				break
			}
		}
	}
	if p.Driver == nil {
		for i := 0; i < p.Yields; i++ {
			runtime.Gosched()
			if c.state.Load() == stateDone {
				return true
			}
		}
	}
	w := GetWaker()
	defer PutWaker(w)
	for {
		if !c.arm(w) {
			return true
		}
		if !w.Park(abort) {
			return c.Done()
		}
		if c.Done() {
			return true
		}
	}
}

// WaitAny waits until at least one of cs (nil entries are skipped) is done and returns its index, or -1 if abort
// was closed first.
func WaitAny(cs []*Completion, p *Policy, abort <-chan struct{}) int {
	return WaitAnyStop(cs, p, abort, nil)
}

// WaitAnyStop is WaitAny that also gives up, returning -1, once stop is closed (a nil stop never is): a caller
// waiting under a context. The caller tells abort from stop by looking at them.
func WaitAnyStop(cs []*Completion, p *Policy, abort, stop <-chan struct{}) int {
	return WaitAnyEvent(cs, nil, 0, p, abort, stop)
}

// EventFired is what WaitAnyEvent returns when its event was signalled.
const EventFired = -2

// WaitAnyEvent is WaitAnyStop that also returns, with EventFired, once ev has been signalled since generation gen
// (ev.Gen() read before the caller last looked at what ev stands for). A nil ev is never signalled.
func WaitAnyEvent(cs []*Completion, ev *Event, gen uint64, p *Policy, abort, stop <-chan struct{}) int {
	found := -1
	scan := func() bool {
		for i, c := range cs {
			if c != nil && c.Done() {
				found = i
				return true
			}
		}
		if ev != nil && ev.gen.Load() != gen {
			found = EventFired
			return true
		}
		return false
	}
	if p.spin(scan) {
		return found
	}
	w := GetWaker()
	defer PutWaker(w)
	for {
		for i, c := range cs {
			if c != nil && !c.arm(w) {
				return i
			}
		}
		if ev != nil && !ev.arm(w, gen) {
			return EventFired
		}
		ok := w.parkStop(abort, stop)
		if ev != nil {
			ev.disarm(w)
		}
		if scan() {
			return found
		}
		if !ok {
			return -1
		}
	}
}

// Event is a broadcast signal that any number of goroutines may wait on at once (WaitAnyEvent): Signal wakes every
// one of them. Its generation counts the signals, so that a waiter that reads it, then looks at what the event
// stands for, then waits, misses no signal in between. A rank's nonblocking collectives signal their rank's
// event whenever one of them can move on, and every goroutine of the rank waiting in a completion call then runs
// them (MPI's progress rule: a rank waiting for anything moves all its operations on).
type Event struct {
	gen     atomic.Uint64
	waiting atomic.Int32 // goroutines inside a wait that looks at the event (Enter, Leave)
	parked  atomic.Int32 // len(wakers), read without the lock
	mu      sync.Mutex
	wakers  []*Waker
}

// Gen returns the number of signals so far.
func (e *Event) Gen() uint64 { return e.gen.Load() }

// Signal wakes every goroutine waiting on e.
func (e *Event) Signal() {
	e.gen.Add(1)
	if e.parked.Load() == 0 {
		return
	}
	e.mu.Lock()
	for i, w := range e.wakers {
		w.Wake()
		e.wakers[i] = nil
	}
	e.wakers = e.wakers[:0]
	e.parked.Store(0)
	e.mu.Unlock()
}

// Enter and Leave bracket a wait that looks at the event, spinning or parked; Waiting reports whether one is under
// way, so that a signaller knows whether someone will act on its signal.
func (e *Event) Enter()        { e.waiting.Add(1) }
func (e *Event) Leave()        { e.waiting.Add(-1) }
func (e *Event) Waiting() bool { return e.waiting.Load() > 0 }

// arm registers w to be woken by the next signal, unless there has been one since gen (then it returns false).
// parked is raised before gen is read: a signaller that moved gen after this read then sees the waker.
func (e *Event) arm(w *Waker, gen uint64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.wakers = append(e.wakers, w)
	e.parked.Store(int32(len(e.wakers)))
	if e.gen.Load() != gen {
		e.wakers[len(e.wakers)-1] = nil
		e.wakers = e.wakers[:len(e.wakers)-1]
		e.parked.Store(int32(len(e.wakers)))
		return false
	}
	return true
}

// disarm takes w off the list if a signal has not already.
func (e *Event) disarm(w *Waker) {
	if e.parked.Load() == 0 {
		return
	}
	e.mu.Lock()
	for i, x := range e.wakers {
		if x == w {
			last := len(e.wakers) - 1
			e.wakers[i], e.wakers[last] = e.wakers[last], nil
			e.wakers = e.wakers[:last]
			break
		}
	}
	e.parked.Store(int32(len(e.wakers)))
	e.mu.Unlock()
}

// SpinFor busy-waits on cond for the policy's window, then yields; it reports whether cond became true. It never
// parks: callers park on a Waker afterwards.
func (p *Policy) SpinFor(cond func() bool) bool { return p.spin(cond) }

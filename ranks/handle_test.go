package ranks

import (
	"errors"
	"runtime"
	"testing"
	"unsafe"

	"github.com/gompj/gompj/queues"
)

// TestCollStateReused: once a small collective's run is reported, its state serves the rank's next CollRequest,
// and the old handle reads as a reported request should, whatever the state does since: Wait and Test return an
// empty Status at once, Cancel does nothing, Start is ErrRequest (not persistent), and Free releases the handle
// alone, after which its use is ErrRequest, while the new run goes on undisturbed.
func TestCollStateReused(t *testing.T) {
	c := world(t, 1).Comm(0)
	boom := errors.New("boom")
	old := c.CollRequest()
	CompleteColl(old, boom)
	if _, err := old.Wait(); !errors.Is(err, boom) {
		t.Fatalf("first Wait: %v, want the run's error", err)
	}
	cur := c.CollRequest()
	if cur.s != old.s {
		t.Fatal("the reported run's state was not reused by the rank's next CollRequest")
	}
	if cur == old || cur.gen == old.gen {
		t.Fatal("the new run has the old handle or generation")
	}
	// The state is active again, for cur: old must not see it.
	if st, err := old.Wait(); err != nil || st != (Status{}) {
		t.Fatalf("Wait on the old handle: %+v, %v; want an empty Status at once", st, err)
	}
	if st, ok, err := old.Test(); err != nil || !ok || st != (Status{}) {
		t.Fatalf("Test on the old handle: %+v, %v, %v", st, ok, err)
	}
	if err := old.Cancel(); err != nil {
		t.Fatalf("Cancel on the old handle: %v", err)
	}
	if err := old.Start(); !errors.Is(err, ErrRequest) {
		t.Fatalf("Start on the old handle: %v, want ErrRequest", err)
	}
	if i, _, err := Waitany(old); i != -1 || err != nil {
		t.Fatalf("Waitany of the old handle alone: %d, %v; want -1 (none active)", i, err)
	}
	if _, ok, err := cur.Test(); ok || err != nil {
		t.Fatalf("the new run is done before its completion (%v, %v)", ok, err)
	}
	if err := old.Free(); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Wait(); !errors.Is(err, ErrRequest) {
		t.Fatalf("Wait after Free: %v, want ErrRequest", err)
	}
	if err := old.Free(); !errors.Is(err, ErrRequest) {
		t.Fatalf("Free twice: %v, want ErrRequest", err)
	}
	if i, _, err := Waitany(cur, old); err == nil || i != -1 {
		t.Fatalf("Waitany with a freed handle: %d, %v; want ErrRequest", i, err)
	}
	// Free of the old handle left the state alone: the new run completes and reports as usual.
	CompleteColl(cur, nil)
	if _, err := cur.Wait(); err != nil {
		t.Fatal(err)
	}
	// A run freed while active is taken back once its flag is set (nobody reports it), under its next generation:
	// the freed handle's uses fail.
	act := c.CollRequest()
	if err := act.Free(); err != nil {
		t.Fatal(err)
	}
	CompleteColl(act, nil)
	if next := c.CollRequest(); next.s != act.s {
		t.Fatal("a run freed while active, and over, was not reused")
	} else if _, err := act.Wait(); !errors.Is(err, ErrRequest) {
		t.Fatalf("Wait on the freed handle: %v, want ErrRequest", err)
	} else {
		CompleteColl(next, nil)
		if _, err := next.Wait(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCollStateNotReusedWhenWatched: a run that a waiter parked on (or a hook was armed on) keeps its state, since
// the completer may still wake through it after its flag; the next CollRequest gets another.
func TestCollStateNotReusedWhenWatched(t *testing.T) {
	c := world(t, 1).Comm(0)
	r := c.CollRequest()
	done := make(chan error)
	go func() {
		_, err := r.Wait()
		done <- err
	}()
	for CompletionOf(r).Unwatched() {
		runtime.Gosched() // until the waiter has armed its waker: it parks on the flag
	}
	CompleteColl(r, nil)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if next := c.CollRequest(); next.s == r.s {
		t.Fatal("a run whose flag had a waiter was reused")
	}
}

// TestCollStateBytes: a loop of small collectives' runs, each started, completed and waited for, allocates only
// handles once their states are reused: 16 bytes per run (a handle, from blocks of 64), where a state per run
// was 256 bytes and more (its share of a 4 KiB block).
func TestCollStateBytes(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	c := world(t, 1).Comm(0)
	const runs = 64 * 100
	run := func() {
		r := c.CollRequest()
		CompleteColl(r, nil)
		if _, err := r.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if per := bytesPerRun(runs, run); per > 32 {
		t.Fatalf("%.1f bytes per run; want the handle's 16 (the state reused)", per)
	}
}

// TestCollStateConcurrentCompletion: goroutines that complete the same small-collective requests at once (Waitany,
// Waitsome, Testany over one list, as TestConcurrentCompletion does for receives), while the rank goes on making
// requests whose states are the reported ones reused: every run is reported exactly once, and a goroutine that
// still looks at a reused state through an old handle neither reports nor disturbs the new run (under the race
// detector: reads nothing that reuse writes).
func TestCollStateConcurrentCompletion(t *testing.T) {
	c := world(t, 1).Comm(0)
	const rounds, n, goroutines = 200, 6, 3
	reused := 0
	defer func() {
		t.Logf("%d of %d new runs reused a state of the round's requests", reused, rounds*n)
		if reused == 0 && !t.Failed() {
			t.Error("no new run ever reused a reported state: the test did not look at what it is for")
		}
	}()
	for round := range rounds {
		reqs := make([]*Request, n)
		for i := range reqs {
			reqs[i] = c.CollRequest()
		}
		got := make(chan []int, goroutines)
		errs := make(chan error, goroutines)
		for g := range goroutines {
			go func() {
				var mine []int
				defer func() { got <- mine }()
				for {
					idx, _, err := completeSome(g, reqs)
					if err != nil {
						errs <- err
						return
					}
					if idx == nil {
						return // nothing active any more
					}
					mine = append(mine, idx...)
				}
			}()
		}
		// Complete them one by one, making a new run after each: once the first reports are in, its state may be a
		// reported one's, which the goroutines may still be looking at through the old handle.
		var next []*Request
		for i := range reqs {
			CompleteColl(reqs[i], nil)
			runtime.Gosched()
			nr := c.CollRequest()
			for _, r := range reqs {
				if nr.s == r.s {
					reused++
				}
			}
			next = append(next, nr)
		}
		count := make([]int, n)
		for range goroutines {
			for _, i := range <-got {
				count[i]++
			}
		}
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
		for i, k := range count {
			if k != 1 {
				t.Fatalf("round %d: request %d reported %d times", round, i, k)
			}
		}
		for _, r := range next {
			if _, ok, err := r.Test(); ok || err != nil {
				t.Fatalf("round %d: a new run is done before its completion (%v, %v)", round, ok, err)
			}
			CompleteColl(r, nil)
			if _, err := r.Wait(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestP2PStateReused: a one-shot receive's and send's states go back to their rank once reported, and serve its
// next nonblocking calls (and blocking ones) with nothing of their last run left: a cancelled receive's state
// reports its next run as received, not cancelled; a loop of self-messages allocates handles only.
func TestP2PStateReused(t *testing.T) {
	c := world(t, 1).Comm(0)
	got := make([]int64, 1)
	r, err := c.Irecv(got, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Cancel(); err != nil {
		t.Fatal(err)
	}
	if st, err := r.Wait(); err != nil || !st.Canceled() {
		t.Fatalf("cancelled receive: %+v, %v", st, err)
	}
	r2, err := c.Irecv(got, 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	if r2.s != r.s {
		t.Fatal("the reported receive's state was not reused by the next Irecv")
	}
	if err := c.Send([]int64{42}, 0, 4); err != nil {
		t.Fatal(err)
	}
	st, err := r2.Wait()
	if err != nil || st.Canceled() || st.Tag != 4 || st.Count() != 1 || got[0] != 42 {
		t.Fatalf("reused receive: %+v, %v, got %d", st, err, got[0])
	}
	if st, err := r.Wait(); err != nil || st != (Status{}) {
		t.Fatalf("the first handle after its state's reuse: %+v, %v", st, err)
	}
	if raceEnabled {
		return // the race detector allocates
	}
	const runs = 64 * 50
	one := []int64{7}
	run := func() {
		rr, err := c.Irecv(got, 0, 5)
		if err != nil {
			t.Fatal(err)
		}
		sr, err := c.Isend(one, 0, 5)
		if err != nil {
			t.Fatal(err)
		}
		if err := Waitall(sr, rr); err != nil {
			t.Fatal(err)
		}
	}
	// Per run: two handles (32 bytes) and Waitall's argument slice, boxed as its variadic list escapes (32).
	if per := bytesPerRun(runs, run); per > 96 {
		t.Fatalf("%.1f bytes per Irecv, Isend and Waitall; want their handles' (the states reused)", per)
	}
}

// bytesPerRun returns the bytes run allocates per call, on average over runs calls after a first one (which may
// make what later ones reuse). Bytes, not allocations: a state from a block is one allocation in many, and the
// block's size is what each call costs the collector.
func bytesPerRun(runs int, run func()) float64 {
	run()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		run()
	}
	runtime.ReadMemStats(&after)
	return float64(after.TotalAlloc-before.TotalAlloc) / float64(runs)
}

// finishOp is an Operation that finishes at its first Progress once let go, with err.
type finishOp struct {
	go_ bool
	err error
}

func (o *finishOp) Progress() (bool, error)     { return o.go_, o.err }
func (o *finishOp) Blocker() *queues.Completion { return nil }

// TestOpStateReused: a one-shot operation request's state goes back to its rank once reported, off the rank's list
// of active operations, and serves the rank's next OpRequest under a new handle; the old handle reads as reported,
// the new run completes with its own operation only, and the state no longer holds the old operation.
func TestOpStateReused(t *testing.T) {
	if unsafe.Offsetof(opRequest{}.r) != 0 {
		t.Fatal("reuseOp finds an operation request's opRequest from its state: the state must be its first field")
	}
	c := world(t, 1).Comm(0)
	boom := errors.New("boom")
	first := &finishOp{go_: true, err: boom}
	old := c.OpRequest(first)
	Launch(old)
	if _, err := old.Wait(); !errors.Is(err, boom) {
		t.Fatalf("first Wait: %v, want the operation's error", err)
	}
	if n := c.r.ops.n.Load(); n != 0 {
		t.Fatalf("%d operations listed after the only one was reported", n)
	}
	second := &finishOp{}
	cur := c.OpRequest(second)
	Launch(cur)
	if cur.s != old.s {
		t.Fatal("the reported operation's state was not reused by the rank's next OpRequest")
	}
	if cur == old || cur.gen == old.gen || cur.s.ext.op != second {
		t.Fatal("the new run has the old handle, generation or operation")
	}
	if st, err := old.Wait(); err != nil || st != (Status{}) {
		t.Fatalf("Wait on the old handle: %+v, %v; want an empty Status at once", st, err)
	}
	if _, ok, err := cur.Test(); ok || err != nil {
		t.Fatalf("the new run is done before its operation (%v, %v)", ok, err)
	}
	second.go_ = true
	if _, err := cur.Wait(); err != nil {
		t.Fatalf("the new run: %v, want its own operation's outcome", err)
	}
	// A run freed while active is never reused.
	act := c.OpRequest(&finishOp{})
	Launch(act)
	if err := act.Free(); err != nil {
		t.Fatal(err)
	}
	if next := c.OpRequest(&finishOp{go_: true}); next.s == act.s {
		t.Fatal("a run freed while active was reused")
	}
}

// TestOpRequestLoose: a large operation's request (package nbc keeps such operations weakly) is never a new one of the
// rank's block, which would tie the operation to the block's other requests while it runs; it is a reported one
// when the rank has one, under a handle of its own, and the old handle reads as reported.
func TestOpRequestLoose(t *testing.T) {
	c := world(t, 1).Comm(0)
	first := c.OpRequestLoose(&finishOp{go_: true})
	if c.r.ops.chunk.Load() != nil {
		t.Fatal("the first loose request came from a new block of the rank")
	}
	Launch(first)
	if _, err := first.Wait(); err != nil {
		t.Fatal(err)
	}
	second := &finishOp{go_: true}
	next := c.OpRequestLoose(second)
	if next.s != first.s || next == first || next.gen == first.gen || next.s.ext.op != second {
		t.Fatal("the reported request's state was not reused under a new handle and generation, for the new operation")
	}
	Launch(next)
	if st, err := first.Wait(); err != nil || st != (Status{}) {
		t.Fatalf("Wait on the old handle: %+v, %v; want an empty Status at once", st, err)
	}
	if _, err := next.Wait(); err != nil {
		t.Fatal(err)
	}
	if c.r.ops.chunk.Load() != nil {
		t.Fatal("a loose request came from a new block of the rank")
	}
}

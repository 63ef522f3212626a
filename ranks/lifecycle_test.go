package ranks

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"weak"

	"github.com/gompj/gompj/queues"
)

// checkInactive asserts that r is inactive: every completion call skips it, and Wait and Test return at once with
// an empty Status.
func checkInactive(r *Request) error {
	if st, err := r.Wait(); err != nil || st != (Status{}) {
		return fmt.Errorf("Wait on an inactive request: %+v %v", st, err)
	}
	if st, ok, err := r.Test(); err != nil || !ok || st != (Status{}) {
		return fmt.Errorf("Test on an inactive request: %+v %v %v", st, ok, err)
	}
	if i, st, err := Waitany(nil, r); i != -1 || err != nil || st != (Status{}) {
		return fmt.Errorf("Waitany over an inactive request: %d %v", i, err)
	}
	if idx, sts, err := Waitsome(r, nil); idx != nil || sts != nil || err != nil {
		return fmt.Errorf("Waitsome over an inactive request: %v %v", idx, err)
	}
	if i, _, ok, err := Testany(r); i != -1 || !ok || err != nil {
		return fmt.Errorf("Testany over an inactive request: %d %v %v", i, ok, err)
	}
	if idx, sts, err := Testsome(nil, r); idx != nil || sts != nil || err != nil {
		return fmt.Errorf("Testsome over an inactive request: %v %v", idx, err)
	}
	if ok, err := Testall(r, nil); !ok || err != nil {
		return fmt.Errorf("Testall over an inactive request: %v %v", ok, err)
	}
	if err := Waitall(r); err != nil {
		return fmt.Errorf("Waitall over an inactive request: %v", err)
	}
	if err := r.Cancel(); err != nil {
		return fmt.Errorf("Cancel of an inactive request: %v", err)
	}
	return nil
}

// One rule for every kind of request: once a completion call has reported it, it is inactive.
func TestLifeCycleEveryKind(t *testing.T) {
	w := world(t, 2)
	err := spmd(w, func(c *Comm) error {
		peer := 1 - c.Rank()
		type kind struct {
			name  string
			start func() (*Request, error)
			want  Status // Source and Tag, where they mean something
		}
		big := make([]byte, 100<<10) // over the intra-node eager limit: rendezvous
		kinds := []kind{
			{"eager send", func() (*Request, error) { return c.Isend([]int{1}, peer, 1) }, Status{}},
			{"rendezvous send", func() (*Request, error) { return c.Isend(big, peer, 2) }, Status{}},
			{"synchronous send", func() (*Request, error) { return c.Issend([]int{3}, peer, 3) }, Status{}},
			{"object send", func() (*Request, error) { return c.Isend(map[string]int{"a": 1}, peer, 4) }, Status{}},
			{"nil send", func() (*Request, error) { return c.Isend(nil, peer, 5) }, Status{}},
			{"receive", func() (*Request, error) { return c.Irecv(make([]int, 1), peer, 1) }, Status{Source: peer, Tag: 1}},
			{"rendezvous receive", func() (*Request, error) { return c.Irecv(make([]byte, len(big)), peer, 2) }, Status{Source: peer, Tag: 2}},
			{"synchronous receive", func() (*Request, error) { return c.Irecv(make([]int, 1), AnySource, 3) }, Status{Source: peer, Tag: 3}},
			{"object receive", func() (*Request, error) { var m map[string]int; return c.Irecv(&m, peer, 4) }, Status{Source: peer, Tag: 4}},
			{"nil receive", func() (*Request, error) { return c.Irecv(nil, peer, AnyTag) }, Status{Source: peer, Tag: 5}},
			{"ProcNull send", func() (*Request, error) { return c.Isend([]int{1}, ProcNull, 0) }, Status{}},
			{"ProcNull receive", func() (*Request, error) { return c.Irecv([]int{1}, ProcNull, 0) }, Status{Source: ProcNull, Tag: AnyTag}},
			{"operation", func() (*Request, error) {
				if c.Rank() == 0 {
					return w.NewOpRequest(&twoStep{c: c, buf: make([]int, 1), peer: 1}), nil
				}
				return w.NewOpRequest(&mirror{c: c}), nil
			}, Status{}},
		}
		var reqs []*Request
		for _, k := range kinds {
			r, err := k.start()
			if err != nil {
				return fmt.Errorf("%s: %v", k.name, err)
			}
			reqs = append(reqs, r)
		}
		// The first completion call reports each one; every call after that finds it inactive. Complete them by
		// different calls: Wait, Test, Waitany, Waitsome.
		for i, r := range reqs {
			k := kinds[i]
			var st Status
			var err error
			switch i % 4 {
			case 0:
				st, err = r.Wait()
			case 1:
				ok := false
				for !ok && err == nil {
					st, ok, err = r.Test()
				}
			case 2:
				var j int
				j, st, err = Waitany(nil, r)
				if j != 1 {
					err = fmt.Errorf("Waitany index %d", j)
				}
			case 3:
				var idx []int
				var sts []Status
				idx, sts, err = Waitsome(r)
				if len(idx) != 1 || idx[0] != 0 {
					err = fmt.Errorf("Waitsome indices %v", idx)
				} else {
					st = sts[0]
				}
			}
			if err != nil {
				return fmt.Errorf("%s: %v", k.name, err)
			}
			if st.Source != k.want.Source || st.Tag != k.want.Tag {
				return fmt.Errorf("%s: status %+v, want source %d tag %d", k.name, st, k.want.Source, k.want.Tag)
			}
			if err := checkInactive(r); err != nil {
				return fmt.Errorf("%s: %v", k.name, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// mirror is the other side of twoStep: send 41 with tag 1, then receive the incremented value with tag 2.
type mirror struct {
	c     *Comm
	stage int
	child *Request
	buf   [1]int
}

func (o *mirror) Progress() (bool, error) {
	for {
		if o.child != nil {
			if _, done, err := o.child.Test(); err != nil || !done {
				return err != nil, err
			}
		}
		var err error
		switch o.stage {
		case 0:
			o.buf[0] = 41
			o.child, err = o.c.Isend(o.buf[:], 0, 1)
		case 1:
			o.child, err = o.c.Irecv(o.buf[:], 0, 2)
		default:
			if o.buf[0] != 42 {
				return true, fmt.Errorf("mirror got %d", o.buf[0])
			}
			return true, nil
		}
		o.stage++
		if err != nil {
			return true, err
		}
	}
}

func (o *mirror) Blocker() *queues.Completion {
	if o.child == nil {
		return nil
	}
	return CompletionOf(o.child)
}

// A persistent send and receive run again and again on the same requests: each Start sends the buffer's contents
// at that moment, eager and rendezvous, slices and objects; between runs the requests are inactive.
func TestPersistentPointToPoint(t *testing.T) {
	w := world(t, 2)
	err := spmd(w, func(c *Comm) error {
		peer := 1 - c.Rank()
		for _, n := range []int{1, 5000, 20000} { // 8 B, 40 KB (eager), 160 KB (rendezvous)
			sbuf, rbuf := make([]int64, n), make([]int64, n)
			send, err := c.SendInit(sbuf, peer, n)
			if err != nil {
				return err
			}
			recv, err := c.RecvInit(rbuf, peer, n)
			if err != nil {
				return err
			}
			ssend, err := c.SsendInit(sbuf, peer, n+1)
			if err != nil {
				return err
			}
			srecv, err := c.RecvInit(rbuf, AnySource, AnyTag)
			if err != nil {
				return err
			}
			for _, r := range []*Request{send, recv, ssend, srecv} { // created inactive
				if err := checkInactive(r); err != nil {
					return fmt.Errorf("before Start: %v", err)
				}
			}
			for run := 0; run < 20; run++ {
				for i := range sbuf {
					sbuf[i] = int64(c.Rank()*1000000 + run*1000 + i)
				}
				pair := []*Request{recv, send}
				if run%2 == 1 {
					pair = []*Request{srecv, ssend}
				}
				if run%3 == 0 {
					if err := pair[0].Start(); err != nil {
						return err
					}
					if err := pair[1].Start(); err != nil {
						return err
					}
				} else if err := Startall(pair...); err != nil {
					return err
				}
				st, err := pair[0].Wait()
				if err != nil {
					return err
				}
				if _, err := pair[1].Wait(); err != nil {
					return err
				}
				if st.Source != peer || st.Count() != n || (run%2 == 0 && st.Tag != n) || (run%2 == 1 && st.Tag != n+1) {
					return fmt.Errorf("n %d run %d: status %+v count %d", n, run, st, st.Count())
				}
				for i, v := range rbuf {
					if v != int64(peer*1000000+run*1000+i) {
						return fmt.Errorf("n %d run %d: element %d is %d", n, run, i, v)
					}
				}
				for _, r := range pair {
					if err := checkInactive(r); err != nil {
						return fmt.Errorf("after run %d: %v", run, err)
					}
				}
			}
			for _, r := range []*Request{send, recv, ssend, srecv} {
				if err := r.Free(); err != nil {
					return err
				}
			}
		}
		// Objects: a pointer is encoded at each Start, so each run sends its current value.
		type point struct{ X, Y int }
		var out, in point
		send, err := c.SendInit(&out, peer, 7)
		if err != nil {
			return err
		}
		recv, err := c.RecvInit(&in, peer, 7)
		if err != nil {
			return err
		}
		for run := 0; run < 5; run++ {
			out = point{run, c.Rank()}
			if err := Startall(send, recv); err != nil {
				return err
			}
			if err := Waitall(send, recv); err != nil {
				return err
			}
			if in != (point{run, peer}) {
				return fmt.Errorf("object run %d: got %+v", run, in)
			}
		}
		// ProcNull: every run completes at once.
		pn, err := c.RecvInit(make([]int, 1), ProcNull, 0)
		if err != nil {
			return err
		}
		for run := 0; run < 3; run++ {
			if err := pn.Start(); err != nil {
				return err
			}
			if st, err := pn.Wait(); err != nil || st.Source != ProcNull {
				return fmt.Errorf("ProcNull run %d: %+v %v", run, st, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Misuse of requests is ErrRequest and changes nothing.
func TestRequestErrors(t *testing.T) {
	w := world(t, 1)
	err := spmd(w, func(c *Comm) error {
		inactive := func() *Request { r, _ := c.RecvInit(make([]int, 1), 0, 99); return r }
		active := func() *Request { r := inactive(); r.Start(); return r }
		freed := func() *Request { r := inactive(); r.Free(); return r }
		oneShot := func() *Request { r, _ := c.Irecv(make([]int, 1), 0, 98); return r }
		a := active()
		dup := inactive()
		cases := []struct {
			name string
			call func() error
		}{
			{"Start of nil", func() error { return (*Request)(nil).Start() }},
			{"Start of an active request", func() error { return a.Start() }},
			{"Start of a nonblocking request", func() error { return oneShot().Start() }},
			{"Start of a freed request", func() error { return freed().Start() }},
			{"Startall with nil", func() error { return Startall(inactive(), nil) }},
			{"Startall with an active request", func() error { return Startall(inactive(), a) }},
			{"Startall with a request twice", func() error { return Startall(dup, inactive(), dup) }},
			{"Free of nil", func() error { return (*Request)(nil).Free() }},
			{"Free twice", func() error { return freed().Free() }},
			{"Wait on a freed request", func() error { _, err := freed().Wait(); return err }},
			{"Test of a freed request", func() error { _, _, err := freed().Test(); return err }},
			{"Waitall with a freed request", func() error { return Waitall(freed()) }},
			{"Waitany with a freed request", func() error { _, _, err := Waitany(nil, freed()); return err }},
			{"Waitsome with a freed request", func() error { _, _, err := Waitsome(freed()); return err }},
			{"Testany with a freed request", func() error { _, _, _, err := Testany(freed()); return err }},
			{"Testsome with a freed request", func() error { _, _, err := Testsome(freed()); return err }},
			{"Testall with a freed request", func() error { _, err := Testall(freed()); return err }},
			{"Cancel of a freed request", func() error { return freed().Cancel() }},
			{"Cancel of nil", func() error { return (*Request)(nil).Cancel() }},
			{"Test of nil", func() error { _, _, err := (*Request)(nil).Test(); return err }},
			{"Cancel of a collective", func() error {
				return w.NewOpRequest(&twoStep{c: c, buf: make([]int, 1), peer: 0, stage: 2}).Cancel()
			}},
		}
		for _, k := range cases {
			if err := k.call(); !errors.Is(err, ErrRequest) {
				return fmt.Errorf("%s: got %v, want ErrRequest", k.name, err)
			}
		}
		// Nothing changed: the Startall that failed started none of its requests (dup is inactive, so Start works),
		// and the active request is still active and completes.
		if err := dup.Start(); err != nil {
			return fmt.Errorf("Startall that failed left a request started: %v", err)
		}
		if err := c.Send([]int{5}, 0, 99); err != nil {
			return err
		}
		if err := c.Send([]int{6}, 0, 99); err != nil {
			return err
		}
		if err := Waitall(a, dup); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// restartable is a persistent operation: at each Start, rank 0 receives a value from rank 1 and sends it back
// incremented (twoStep); rank 1 does the mirror image. It counts its runs and releases.
type restartable struct {
	Operation
	mk       func() Operation
	runs     int
	released *atomic.Int32
}

func (o *restartable) Start() error {
	o.Operation = o.mk()
	o.runs++
	return nil
}

func (o *restartable) Release() { o.released.Add(1) }

// A persistent collective is just another kind of persistent request: Start, Startall, Free and the completion
// calls drive it as they drive point-to-point ones; Free of an active one lets it run to its end, then releases it.
func TestPersistentOperation(t *testing.T) {
	w := world(t, 2)
	var released atomic.Int32
	err := spmd(w, func(c *Comm) error {
		op := &restartable{released: &released, mk: func() Operation {
			if c.Rank() == 0 {
				return &twoStep{c: c, buf: make([]int, 1), peer: 1}
			}
			return &mirror{c: c}
		}}
		r := w.NewPersistentRequest(op)
		if err := checkInactive(r); err != nil {
			return err
		}
		for run := 0; run < 10; run++ {
			if run%2 == 0 {
				if err := r.Start(); err != nil {
					return err
				}
			} else if err := Startall(r); err != nil {
				return err
			}
			if err := r.Start(); !errors.Is(err, ErrRequest) {
				return fmt.Errorf("Start of an active collective: %v", err)
			}
			if _, err := r.Wait(); err != nil {
				return fmt.Errorf("run %d: %v", run, err)
			}
			if err := checkInactive(r); err != nil {
				return err
			}
		}
		// Free while active: the run still completes (the peer's Wait returns), then the operation is released.
		if err := r.Start(); err != nil {
			return err
		}
		if err := r.Free(); err != nil {
			return err
		}
		if _, err := r.Wait(); !errors.Is(err, ErrRequest) {
			return fmt.Errorf("Wait after Free: %v", err)
		}
		// Nobody waits for the freed runs: the completion calls of the node progress them. Test a receive that
		// nothing will match until both are released (which happens only once each has completed), then cancel it.
		never, err := c.Irecv(make([]int, 1), 1-c.Rank(), 77)
		if err != nil {
			return err
		}
		for released.Load() < 2 {
			if _, done, err := never.Test(); done || err != nil {
				return fmt.Errorf("the unmatched receive: %v %v", done, err)
			}
			runtime.Gosched()
		}
		if op.runs != 11 {
			return fmt.Errorf("%d runs", op.runs)
		}
		if err := never.Cancel(); err != nil {
			return err
		}
		if st, err := never.Wait(); err != nil || !st.Canceled() {
			return fmt.Errorf("cancelled receive: %+v %v", st, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Free of an active receive lets it complete: it still takes its message (which no later receive sees), and an
// object receive still decodes into its target, whether the message arrives before Free or after it.
func TestFreeActiveReceive(t *testing.T) {
	w := world(t, 2)
	type obj struct{ A, B int }
	err := spmd(w, func(c *Comm) error {
		for round, arrivesFirst := range []bool{false, true} {
			if c.Rank() == 0 {
				if _, err := c.Recv(nil, 1, 0); err != nil { // rank 1 has posted its receives (and freed them)
					return err
				}
				if err := c.Send(obj{round, 7}, 1, 1); err != nil {
					return err
				}
				if err := c.Send([]int{100 + round}, 1, 2); err != nil {
					return err
				}
				if err := c.Send([]int{200 + round}, 1, 2); err != nil {
					return err
				}
				if err := c.Send(nil, 1, 3); err != nil {
					return err
				}
				continue
			}
			var got obj
			orecv, err := c.Irecv(&got, 0, 1)
			if err != nil {
				return err
			}
			prim := make([]int, 1)
			precv, err := c.RecvInit(prim, 0, 2)
			if err != nil {
				return err
			}
			if err := precv.Start(); err != nil {
				return err
			}
			if !arrivesFirst {
				if err := orecv.Free(); err != nil {
					return err
				}
				if err := precv.Free(); err != nil {
					return err
				}
			}
			if err := c.Send(nil, 0, 0); err != nil {
				return err
			}
			if arrivesFirst {
				if _, err := c.Recv(nil, 0, 3); err != nil { // everything has arrived (and matched)
					return err
				}
				if err := orecv.Free(); err != nil {
					return err
				}
				if err := precv.Free(); err != nil {
					return err
				}
			}
			second := make([]int, 1)
			if _, err := c.Recv(second, 0, 2); err != nil {
				return err
			}
			if !arrivesFirst {
				if _, err := c.Recv(nil, 0, 3); err != nil {
					return err
				}
			}
			if got != (obj{round, 7}) || prim[0] != 100+round || second[0] != 200+round {
				return fmt.Errorf("round %d: object %+v, freed receive %d, next receive %d", round, got, prim[0], second[0])
			}
			if err := orecv.Start(); !errors.Is(err, ErrRequest) {
				return fmt.Errorf("Start after Free: %v", err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// instant is a persistent operation whose every run finishes inside its own Start, as a persistent collective's
// does on the member that arrives last.
type instant struct{ r *Request }

func (o *instant) Start() error                { CompleteOp(o.r, nil); return nil }
func (o *instant) Progress() (bool, error)     { return false, nil }
func (o *instant) Blocker() *queues.Completion { return nil }

// A persistent operation's request is on its rank's list of active operations at most once. Runs that finished in
// their Start, reported by a Wait that had nothing to wait for and so swept nothing, each added the request again:
// the list grew by one per run, without bound, and Wait's lone-operation spin, which needs a count of 1, was lost.
// Freed, the request leaves the list.
func TestPersistentOperationListedOnce(t *testing.T) {
	w := world(t, 1)
	err := spmd(w, func(c *Comm) error {
		op := &instant{}
		op.r = c.PersistentOpRequest(op)
		for run := 0; run < 100; run++ {
			if err := op.r.Start(); err != nil {
				return err
			}
			if n := c.r.ops.n.Load(); n != 1 {
				return fmt.Errorf("run %d: %d operations listed, want 1", run, n)
			}
			if _, err := op.r.Wait(); err != nil {
				return err
			}
		}
		// Freed, it leaves the list at once: the list must not keep it, and its operation, alive.
		if err := op.r.Free(); err != nil {
			return err
		}
		if n := c.r.ops.n.Load(); n != 0 {
			return fmt.Errorf("%d operations listed after Free, want 0", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A completed nonblocking send or receive lets go of its buffer once a completion call has reported it. Requests
// come in blocks (newReq) that live while any of their requests is held or the rank still hands them out, so a
// request that kept its buffer kept a program's freed buffer alive for up to 14 more nonblocking calls, maybe for
// ever: a gigabyte Irecv, a gigabyte.
func TestReportedRequestLetsGoOfBuffer(t *testing.T) {
	w := world(t, 2)
	err := spmd(w, func(c *Comm) error {
		peer := 1 - c.Rank()
		var handles []weak.Pointer[float64]
		for _, n := range []int{4, 1 << 15} { // eager, and rendezvous
			h, err := func() ([]weak.Pointer[float64], error) {
				send, recv := make([]float64, n), make([]float64, n)
				r, err := c.Irecv(recv, peer, 3)
				if err != nil {
					return nil, err
				}
				s, err := c.Isend(send, peer, 3)
				if err != nil {
					return nil, err
				}
				if err := Waitall(s, r); err != nil {
					return nil, err
				}
				return []weak.Pointer[float64]{weak.Make(&send[0]), weak.Make(&recv[0])}, nil
			}()
			if err != nil {
				return err
			}
			handles = append(handles, h...)
		}
		runtime.GC()
		runtime.GC()
		for i, h := range handles {
			if h.Value() != nil {
				return fmt.Errorf("buffer %d of a reported request is still reachable", i)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

package ranks

import (
	"fmt"
	"math/rand"
	"runtime"
	"testing"
)

// A randomised model test of the completion calls and Cancel against a simple reference. Rank 0 holds a changing
// set of requests to and from rank 1 (receives, persistent receives restarted, eager sends, rendezvous sends,
// synchronous sends) and, at random, tells rank 1 to match one of them, cancels one, starts one, or runs a
// completion call (Waitsome, Waitany, Testany, Testsome, Testall). The reference knows which requests are
// done, and whether cancelled, since every match is acknowledged before the next step: each call must report
// exactly what it says, with the right statuses and data, and nothing may be lost or delivered twice.

type modelKind int

const (
	mRecv  modelKind = iota // Irecv: cancellable until matched
	mPRecv                  // persistent RecvInit, restarted: cancellable until matched
	mEager                  // small Isend: complete at once, never cancellable
	mRdv                    // large Isend (rendezvous): cancellable until rank 1 receives it
	mSync                   // small Issend: cancellable until rank 1 receives it
	numModelKinds
)

// modelReq is the reference's view of one request.
type modelReq struct {
	kind     modelKind
	tag      int
	n        int
	r        *Request
	buf      []int64
	active   bool
	done     bool // complete, not yet reported
	canceled bool // its current run was cancelled
	matched  bool // rank 1 acted on its current run (sent to it, or received from it)
}

// modelCmd is what rank 0 asks rank 1 to do: send the message for a receive of rank 0, receive a send of rank 0,
// or check that no message with the tag is there.
type modelCmd struct {
	op     byte // 's' send, 'r' receive, 'a' absent
	tag, n int
}

func modelPattern(tag, i int) int64 { return int64(tag)*1_000_003 + int64(i) }

func TestModelCompletionAndCancel(t *testing.T) {
	seeds, steps := 24, 200
	if testing.Short() {
		seeds = 8
	}
	for seed := 0; seed < seeds; seed++ {
		if err := runModel(t, int64(seed), steps); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

func runModel(t *testing.T, seed int64, steps int) error {
	w := world(t, 2)
	cmds := make(chan modelCmd)
	acks := make(chan error)
	return spmd(w, func(c *Comm) error {
		if c.Rank() == 1 {
			for cmd := range cmds {
				acks <- modelPeer(c, cmd)
			}
			return nil
		}
		defer close(cmds)
		do := func(cmd modelCmd) error {
			cmds <- cmd
			return <-acks
		}
		rng := rand.New(rand.NewSource(seed))
		var reqs []*modelReq
		nextTag := 1
		for step := 0; step < steps; step++ {
			switch op := rng.Intn(10); {
			case op < 3 && len(reqs) < 12: // a new request
				m := &modelReq{kind: modelKind(rng.Intn(int(numModelKinds))), tag: nextTag, active: true}
				nextTag++
				if err := m.begin(c, true); err != nil {
					return err
				}
				reqs = append(reqs, m)
			case op < 5 && len(reqs) > 0: // rank 1 matches one
				m := reqs[rng.Intn(len(reqs))]
				if !m.active || m.matched || m.canceled || m.kind == mEager {
					continue
				}
				cmd := modelCmd{op: 'r', tag: m.tag, n: m.n}
				if m.kind == mRecv || m.kind == mPRecv {
					cmd.op = 's'
				}
				if err := do(cmd); err != nil {
					return err
				}
				m.matched, m.done = true, true
			case op < 6 && len(reqs) > 0: // cancel one
				m := reqs[rng.Intn(len(reqs))]
				if err := m.r.Cancel(); err != nil {
					return fmt.Errorf("step %d: Cancel: %v", step, err)
				}
				if m.active && !m.matched && !m.done && m.kind != mEager {
					m.canceled, m.done = true, true
				}
			case op < 7 && len(reqs) > 0: // restart a persistent receive
				m := reqs[rng.Intn(len(reqs))]
				if m.kind != mPRecv || m.active {
					continue
				}
				if err := m.begin(c, false); err != nil {
					return err
				}
			default:
				if err := modelComplete(rng, reqs, step); err != nil {
					return err
				}
			}
		}
		// The end: cancel what can be, have rank 1 match the rest, report everything.
		for _, m := range reqs {
			if !m.active {
				continue
			}
			if err := m.r.Cancel(); err != nil {
				return err
			}
			if !m.matched && !m.done && m.kind != mEager {
				m.canceled, m.done = true, true
			}
		}
		for _, m := range reqs {
			if m.active && !m.done {
				return fmt.Errorf("request of kind %d neither done nor cancellable", m.kind)
			}
		}
		for {
			if err := modelComplete(rng, reqs, steps); err != nil {
				return err
			}
			left := false
			for _, m := range reqs {
				left = left || m.active
			}
			if !left {
				break
			}
		}
		// Every message is accounted for: eager sends are received now, a cancelled send is not there.
		for _, m := range reqs {
			switch {
			case m.kind == mEager:
				if err := do(modelCmd{op: 'r', tag: m.tag, n: m.n}); err != nil {
					return err
				}
			case (m.kind == mRdv || m.kind == mSync) && m.canceled:
				if err := do(modelCmd{op: 'a', tag: m.tag}); err != nil {
					return err
				}
			}
		}
		if st, ok, err := c.Iprobe(AnySource, AnyTag); ok || err != nil {
			return fmt.Errorf("a message left over at rank 0: %+v %v", st, err)
		}
		return nil
	})
}

// begin starts the request (creating it first if fresh).
func (m *modelReq) begin(c *Comm, fresh bool) error {
	var err error
	switch m.kind {
	case mRecv:
		m.n = 3
		m.buf = make([]int64, m.n)
		m.r, err = c.Irecv(m.buf, 1, m.tag)
	case mPRecv:
		if fresh {
			m.n = 5
			m.buf = make([]int64, m.n)
			if m.r, err = c.RecvInit(m.buf, 1, m.tag); err != nil {
				return err
			}
		}
		clear(m.buf)
		err = m.r.Start()
	case mEager, mRdv, mSync:
		m.n = 4
		if m.kind == mRdv {
			m.n = 20000 // 160 KB: over the eager limit
		}
		m.buf = make([]int64, m.n)
		for i := range m.buf {
			m.buf[i] = modelPattern(m.tag, i)
		}
		switch m.kind {
		case mSync:
			m.r, err = c.Issend(m.buf, 1, m.tag)
		default:
			m.r, err = c.Isend(m.buf, 1, m.tag)
		}
	}
	m.active, m.done, m.canceled, m.matched = true, m.kind == mEager, false, false
	return err
}

// modelPeer is rank 1 carrying out a command.
func modelPeer(c *Comm, cmd modelCmd) error {
	switch cmd.op {
	case 's':
		b := make([]int64, cmd.n)
		for i := range b {
			b[i] = modelPattern(cmd.tag, i)
		}
		return c.Send(b, 0, cmd.tag)
	case 'r':
		b := make([]int64, cmd.n)
		st, err := c.Recv(b, 0, cmd.tag)
		if err != nil {
			return err
		}
		for i, v := range b {
			if v != modelPattern(cmd.tag, i) || st.Count() != cmd.n {
				return fmt.Errorf("rank 1 received tag %d wrong: element %d is %d, count %d", cmd.tag, i, v, st.Count())
			}
		}
	case 'a':
		if st, ok, err := c.Iprobe(0, cmd.tag); ok || err != nil {
			return fmt.Errorf("a cancelled send (tag %d) reached rank 1: %+v %v", cmd.tag, st, err)
		}
	}
	return nil
}

// modelComplete runs one completion call over the requests (in a random order, with nils) and checks what it
// reports against the reference.
func modelComplete(rng *rand.Rand, reqs []*modelReq, step int) error {
	perm := rng.Perm(len(reqs) + 2)
	list := make([]*Request, len(perm))
	of := make([]*modelReq, len(perm))
	for i, p := range perm {
		if p < len(reqs) {
			list[i], of[i] = reqs[p].r, reqs[p]
		}
	}
	var done, active []int
	for i, m := range of {
		if m != nil && m.active {
			active = append(active, i)
			if m.done {
				done = append(done, i)
			}
		}
	}
	check := func(i int, st Status) error {
		m := of[i]
		if i < 0 || m == nil || !m.active || !m.done {
			return fmt.Errorf("step %d: reported index %d, which is not a done active request", step, i)
		}
		if st.Canceled() != m.canceled {
			return fmt.Errorf("step %d: tag %d kind %d: Canceled %v, want %v", step, m.tag, m.kind, st.Canceled(), m.canceled)
		}
		if (m.kind == mRecv || m.kind == mPRecv) && !m.canceled {
			if st.Source != 1 || st.Tag != m.tag || st.Count() != m.n {
				return fmt.Errorf("step %d: receive tag %d: status %+v", step, m.tag, st)
			}
			for j, v := range m.buf {
				if v != modelPattern(m.tag, j) {
					return fmt.Errorf("step %d: receive tag %d: element %d is %d", step, m.tag, j, v)
				}
			}
		}
		if (m.kind == mRecv || m.kind == mPRecv) && m.canceled && st.Count() != 0 {
			return fmt.Errorf("step %d: cancelled receive tag %d: count %d", step, m.tag, st.Count())
		}
		m.active, m.done = false, false
		return nil
	}
	switch call := rng.Intn(5); {
	case call == 0 && (len(done) > 0 || len(active) == 0): // Waitsome: would block otherwise
		idx, sts, err := Waitsome(list...)
		if err != nil {
			return err
		}
		if len(active) == 0 {
			if idx != nil {
				return fmt.Errorf("step %d: Waitsome with nothing active: %v", step, idx)
			}
			return nil
		}
		if fmt.Sprint(idx) != fmt.Sprint(done) {
			return fmt.Errorf("step %d: Waitsome reported %v, want %v", step, idx, done)
		}
		for j, i := range idx {
			if err := check(i, sts[j]); err != nil {
				return err
			}
		}
	case call == 1 && (len(done) > 0 || len(active) == 0): // Waitany
		i, st, err := Waitany(list...)
		if err != nil {
			return err
		}
		if len(active) == 0 {
			if i != -1 {
				return fmt.Errorf("step %d: Waitany with nothing active: %d", step, i)
			}
			return nil
		}
		return check(i, st)
	case call == 2:
		idx, sts, err := Testsome(list...)
		if err != nil {
			return err
		}
		switch {
		case len(active) == 0 && idx != nil:
			return fmt.Errorf("step %d: Testsome with nothing active: %v", step, idx)
		case len(active) > 0 && (idx == nil || fmt.Sprint(idx) != fmt.Sprint(done)):
			return fmt.Errorf("step %d: Testsome reported %v, want %v", step, idx, done)
		}
		for j, i := range idx {
			if err := check(i, sts[j]); err != nil {
				return err
			}
		}
	case call == 3:
		i, st, ok, err := Testany(list...)
		if err != nil {
			return err
		}
		switch {
		case len(active) == 0:
			if i != -1 || !ok {
				return fmt.Errorf("step %d: Testany with nothing active: %d %v", step, i, ok)
			}
		case len(done) == 0:
			if i != -1 || ok {
				return fmt.Errorf("step %d: Testany with nothing done: %d %v", step, i, ok)
			}
		default:
			if !ok {
				return fmt.Errorf("step %d: Testany found none of %v done", step, done)
			}
			return check(i, st)
		}
	default:
		ok, err := Testall(list...)
		if err != nil {
			return err
		}
		if ok != (len(done) == len(active)) {
			return fmt.Errorf("step %d: Testall %v with %d of %d done", step, ok, len(done), len(active))
		}
		if ok {
			for _, i := range done {
				of[i].active, of[i].done = false, false
			}
		}
	}
	return nil
}

// Several goroutines of one rank complete the same requests at once (MPI_THREAD_MULTIPLE): each request is
// reported to exactly one of them, whichever completion call it uses; and goroutines run persistent exchanges of
// their own side by side.
func TestConcurrentCompletion(t *testing.T) {
	const n, goroutines, runs = 64, 4, 50
	w := world(t, 2)
	err := spmd(w, func(c *Comm) error {
		peer := 1 - c.Rank()
		errs := make(chan error, 2*goroutines)
		// Persistent exchanges, one pair per goroutine, on tags 1000+g.
		for g := 0; g < goroutines; g++ {
			go func(g int) {
				out, in := make([]int64, 100), make([]int64, 100)
				s, err := c.SendInit(out, peer, 1000+g)
				if err != nil {
					errs <- err
					return
				}
				r, err := c.RecvInit(in, peer, 1000+g)
				if err != nil {
					errs <- err
					return
				}
				for run := 0; run < runs; run++ {
					out[0], out[99] = int64(run), int64(g)
					if err := Startall(r, s); err != nil {
						errs <- err
						return
					}
					if err := Waitall(s, r); err != nil {
						errs <- err
						return
					}
					if in[0] != int64(run) || in[99] != int64(g) {
						errs <- fmt.Errorf("goroutine %d run %d: got %d %d", g, run, in[0], in[99])
						return
					}
				}
				errs <- nil
			}(g)
		}
		if c.Rank() == 1 {
			for i := 0; i < n; i++ {
				if err := c.Send([]int64{int64(i)}, 0, i); err != nil {
					return err
				}
			}
		} else {
			reqs := make([]*Request, n)
			bufs := make([][]int64, n)
			for i := range reqs {
				bufs[i] = make([]int64, 1)
				var err error
				if reqs[i], err = c.Irecv(bufs[i], 1, i); err != nil {
					return err
				}
			}
			got := make(chan []int, goroutines)
			for g := 0; g < goroutines; g++ {
				go func(g int) {
					var mine []int
					defer func() { got <- mine }()
					for {
						idx, sts, err := completeSome(g, reqs)
						if err != nil {
							errs <- err
							return
						}
						if idx == nil {
							return // nothing active any more
						}
						for j, i := range idx {
							if sts[j].Tag != i || bufs[i][0] != int64(i) {
								errs <- fmt.Errorf("request %d: status %+v, data %d", i, sts[j], bufs[i][0])
								return
							}
						}
						mine = append(mine, idx...)
					}
				}(g)
			}
			count := make([]int, n)
			for g := 0; g < goroutines; g++ {
				for _, i := range <-got {
					count[i]++
				}
			}
			for i, k := range count {
				if k != 1 {
					return fmt.Errorf("request %d reported %d times", i, k)
				}
			}
		}
		for g := 0; g < goroutines; g++ {
			if err := <-errs; err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// completeSome completes what it can of reqs the way goroutine g of a test of concurrent completion does: Waitany
// (g%3 == 0), Waitsome (1) or Testany (2, yielding when it found nothing done). It returns the indices reported
// and their statuses (empty when nothing was done yet), or nil once none of reqs is active.
func completeSome(g int, reqs []*Request) ([]int, []Status, error) {
	switch g % 3 {
	case 0:
		i, st, err := Waitany(reqs...)
		if i < 0 {
			return nil, nil, err
		}
		return []int{i}, []Status{st}, err
	case 1:
		return Waitsome(reqs...)
	}
	i, st, ok, err := Testany(reqs...)
	switch {
	case err != nil || (ok && i < 0):
		return nil, nil, err
	case i >= 0:
		return []int{i}, []Status{st}, nil
	}
	runtime.Gosched()
	return []int{}, []Status{}, nil
}

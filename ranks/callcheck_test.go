package ranks

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/queues"
)

// linkDevice hands every eager message straight to another node's World, as a device would once it arrived. The
// call check sends nothing else.
type linkDevice struct {
	peer  *World
	limit int
	sent  int
}

func (d *linkDevice) SendEager(h *device.Header, p []byte, _ device.Completer) error {
	d.sent++
	d.peer.DeliverEager(&device.Inbound{Header: *h, Payload: slices.Clone(p)})
	return nil
}
func (d *linkDevice) SendRendezvous(*device.Header, []byte, device.Completer) error { return nil }
func (d *linkDevice) ClearToSend(*device.Header, []byte, device.Completer) error    { return nil }
func (d *linkDevice) Ack(*device.Header) error                                      { return nil }
func (d *linkDevice) EagerLimit(int) int                                            { return d.limit }
func (d *linkDevice) Close() error                                                  { return nil }

// logCall is a collective call on c whose arguments pass its checks: noted by the API, started by the collective.
func logCall(c *Comm, k CallKind, root int) {
	c.NoteCall(k, root)
	c.StartCall()
}

// checkPair is a job of 4 ranks on 2 nodes (ranks 0-1 and 2-3) whose Worlds check collective calls, linked.
type checkPair struct {
	w    [2]*World
	link [2]*linkDevice
}

func newCheckPair(t *testing.T) *checkPair {
	t.Helper()
	p := &checkPair{}
	for i := range p.w {
		p.link[i] = &linkDevice{limit: 64 << 10}
		w, err := NewWorld(Options{Size: 4, Lo: 2 * i, Hi: 2*i + 2, EagerLimit: 64 << 10,
			Policy: queues.DefaultPolicy(2), Device: p.link[i], NodeOf: func(r int) int { return r / 2 }, CallCheck: true})
		if err != nil {
			t.Fatal(err)
		}
		p.w[i] = w
	}
	p.link[0].peer, p.link[1].peer = p.w[1], p.w[0]
	return p
}

// comm is world rank r's handle of the communicator of every rank on context ctx (0: the world's own).
func (p *checkPair) comm(r int, ctx uint32) *Comm {
	w := p.w[r/2]
	if ctx == 0 {
		return w.Comm(r)
	}
	rk := w.local(r)
	return &Comm{r: rk, w: w, rank: r, size: 4, ctx: ctx}
}

// look runs a look on both nodes, n times.
func (p *checkPair) look(n int) {
	for range n {
		p.w[0].CheckCalls()
		p.w[1].CheckCalls()
	}
}

// cause is the first abort cause of either node, or nil.
func (p *checkPair) cause() error {
	for _, w := range p.w {
		if err := w.AbortCause(); err != nil {
			return err
		}
	}
	return nil
}

// TestCallCheckAgreeing: members that log the same calls never end the job, however many looks, and a node sends
// a call that stays latest once, not at every look.
func TestCallCheckAgreeing(t *testing.T) {
	p := newCheckPair(t)
	for call := range 20 {
		for r := range 4 {
			logCall(p.comm(r, 0), CallKind(1+call%int(numCallKinds-1)), call%4)
		}
		p.look(3)
	}
	if err := p.cause(); err != nil {
		t.Fatalf("agreeing members ended the job: %v", err)
	}
	// 20 calls, each published once by each of 2 ranks per node to the one other node.
	if s0, s1 := p.link[0].sent, p.link[1].sent; s0 != 40 || s1 != 40 {
		t.Fatalf("claims sent: %d and %d, want 40 each", s0, s1)
	}
}

// TestCallCheckDisagreeing: two members stuck in a call they logged differently end the job with ErrArg naming
// both, whether they are on different nodes or on one, whether the root or the collective differs; a call that
// changes between looks is not published yet.
func TestCallCheckDisagreeing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bad   int      // the rank that logs differently
		kind  CallKind // what it logs
		root  int
		words string
	}{
		{"root on the other node", 2, CallReduce, 2, "rank 2 called Reduce with root 2"},
		{"root on the same node", 1, CallReduce, 1, "rank 1 called Reduce with root 1"},
		{"collective", 3, CallBcast, 0, "rank 3 called Bcast with root 0"},
		{"not rooted", 0, CallBarrier, 0, "rank 0 called Barrier"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newCheckPair(t)
			for r := range 4 {
				logCall(p.comm(r, 0), CallBcast, 0)
			}
			p.look(1)
			for r := range 4 {
				k, root := CallReduce, 0
				if r == tc.bad {
					k, root = tc.kind, tc.root
				}
				logCall(p.comm(r, 0), k, root)
			}
			p.look(1) // the latest calls changed: nothing published
			if err := p.cause(); err != nil {
				t.Fatalf("ended at the look that first saw the calls: %v", err)
			}
			p.look(2)
			err := p.cause()
			var re *RankError
			if !errors.As(err, &re) || !errors.Is(err, ErrArg) || !strings.Contains(err.Error(), tc.words) ||
				!strings.Contains(err.Error(), "collective call 2") {
				t.Fatalf("the job ended with %v, want a RankError with ErrArg naming %q in call 2", err, tc.words)
			}
		})
	}
}

// TestCallCheckScope: only communicators that span nodes log (one inside a node, a single member's and an
// intercommunicator's do not), a freed communicator's log is dropped, and a node with no eager credit toward the
// other tries again at its next look.
func TestCallCheckScope(t *testing.T) {
	p := newCheckPair(t)
	w := p.w[0]
	inside := &Comm{r: w.local(0), w: w, rank: 0, size: 2, ctx: 8}
	single := &Comm{r: w.local(0), w: w, rank: 0, size: 1, group: []int32{0}, ctx: 10}
	// An intercommunicator whose local group spans both nodes: only being one keeps it from logging.
	inter := &Comm{r: w.local(0), w: w, rank: 0, size: 2, group: []int32{0, 2}, ctx: 12, remote: []int32{3}}
	for _, c := range []*Comm{inside, single, inter} {
		logCall(c, CallBcast, 0)
		if c.calls.Load() != &unlogged {
			t.Fatalf("a communicator of ctx %d logs its calls", c.ctx)
		}
	}
	var nilComm *Comm
	logCall(nilComm, CallBcast, 0)

	p.link[0].limit = 0 // no credit: the claim waits
	c := p.comm(0, 0)
	logCall(c, CallGather, 1)
	p.w[0].CheckCalls()
	p.w[0].CheckCalls()
	if p.link[0].sent != 0 {
		t.Fatalf("sent %d claims with no eager credit", p.link[0].sent)
	}
	p.link[0].limit = 64 << 10
	p.w[0].CheckCalls()
	if p.link[0].sent != 1 {
		t.Fatalf("sent %d claims once credit came back, want 1", p.link[0].sent)
	}

	d := p.comm(1, 6)
	logCall(d, CallBcast, 0)
	if n := len(w.chk.logs); n != 2 {
		t.Fatalf("%d logs, want 2", n)
	}
	d.freed.Store(true)
	w.CheckCalls()
	if n := len(w.chk.logs); n != 1 {
		t.Fatalf("%d logs after a communicator was freed, want 1", n)
	}
}

// TestCallCheckUnstarted: a call whose arguments fail the collective's checks (noted, never started) is not
// logged, so the member that calls again right stays in step with the others; a start with nothing noted (a
// collective inside another) logs nothing.
func TestCallCheckUnstarted(t *testing.T) {
	p := newCheckPair(t)
	p.comm(0, 0).NoteCall(CallGather, 9) // fails: root 9 of 4
	for r := range 4 {
		logCall(p.comm(r, 0), CallGather, 1)
	}
	p.comm(1, 0).StartCall()
	p.look(3)
	if err := p.cause(); err != nil {
		t.Fatalf("a call that failed its checks ended the job: %v", err)
	}
	if n := p.comm(0, 0).calls.Load().n; n != 1 {
		t.Fatalf("rank 0 logged %d calls, want 1", n)
	}
}

// TestCallLogLatestWraps: the latest call is the one of the highest number, counted modulo 1<<seqBits, also as the
// numbers wrap.
func TestCallLogLatestWraps(t *testing.T) {
	p := newCheckPair(t)
	c := p.comm(0, 0)
	logCall(c, CallBcast, 0)
	l := c.calls.Load()
	l.n = seqMask - 5 // as if that many calls came before: the ring holds consecutive numbers only
	for i := range l.ent {
		l.ent[i].Store(0)
	}
	for i := range 3 * logLen {
		logCall(c, CallKind(1+i%int(numCallKinds-1)), i)
		e := l.latest()
		if want := (uint64(seqMask-5) + uint64(i) + 1) & seqMask; callSeq(e) != want || callRoot(e) != i {
			t.Fatalf("call %d: latest is number %d root %d, want number %d root %d", i, callSeq(e), callRoot(e), want, i)
		}
	}
}

// TestCallCheckClaimsAge: a node compares a claim for claimLife looks, then forgets it.
func TestCallCheckClaimsAge(t *testing.T) {
	p := newCheckPair(t)
	logCall(p.comm(0, 0), CallScatter, 0)
	p.w[0].CheckCalls()
	p.w[0].CheckCalls() // published: node 1 holds the claim
	if n := len(p.w[1].chk.claims); n != 1 {
		t.Fatalf("node 1 holds %d claims, want 1", n)
	}
	for range claimLife {
		p.w[1].CheckCalls()
	}
	if n := len(p.w[1].chk.claims); n != 0 {
		t.Fatalf("node 1 holds %d claims after %d looks, want 0", n, claimLife)
	}
	logCall(p.comm(2, 0), CallScatter, 2) // too late to meet rank 0's claim here; its own claim meets rank 0's log
	p.look(3)
	if err := p.cause(); !errors.Is(err, ErrArg) {
		t.Fatalf("the job ended with %v, want ErrArg", err)
	}
}

// TestCallCheckModel drives random sequences of collective calls on three communicators across both nodes, the ranks
// at random speeds and the looks at random moments, against the reference: members that agree never end the job;
// members that disagree about one call and all stop there (stuck in it) end it by the looks after.
func TestCallCheckModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 7))
	for trial := range 300 {
		p := newCheckPair(t)
		type call struct {
			ctx  uint32
			kind CallKind
			root int
		}
		n := 1 + rng.IntN(30)
		seq := make([]call, n)
		for i := range seq {
			k := CallKind(1 + rng.IntN(int(numCallKinds-1)))
			root := 0
			if k.rooted() {
				root = rng.IntN(4)
			}
			seq[i] = call{ctx: []uint32{0, 6, 8}[rng.IntN(3)], kind: k, root: root}
		}
		bad, badRank := -1, -1
		if rng.IntN(2) == 0 {
			bad, badRank = rng.IntN(n), rng.IntN(4)
		}
		comms := map[[2]int]*Comm{}
		handle := func(r int, ctx uint32) *Comm {
			if c, ok := comms[[2]int{r, int(ctx)}]; ok {
				return c
			}
			c := p.comm(r, ctx)
			comms[[2]int{r, int(ctx)}] = c
			return c
		}
		stop := n // every rank logs calls 0..stop-1
		if bad >= 0 {
			stop = bad + 1
		}
		next := make([]int, 4)
		badLogged := false
		for {
			var left []int
			for r := range 4 {
				if next[r] < stop {
					left = append(left, r)
				}
			}
			if len(left) == 0 {
				break
			}
			r := left[rng.IntN(len(left))]
			cl := seq[next[r]]
			if next[r] == bad && r == badRank {
				if cl.kind.rooted() {
					cl.root = (cl.root + 1) % 4
				} else {
					cl.kind = cl.kind%(numCallKinds-1) + 1
				}
				badLogged = true
			}
			logCall(handle(r, cl.ctx), cl.kind, cl.root)
			next[r]++
			if rng.IntN(3) == 0 {
				p.w[rng.IntN(2)].CheckCalls()
			}
			if !badLogged {
				if err := p.cause(); err != nil {
					t.Fatalf("trial %d: agreeing calls ended the job: %v", trial, err)
				}
			}
		}
		runtime.GC() // a collection before the looks must not drop the logs of live communicators (see below)
		p.look(3)
		err := p.cause()
		if bad < 0 && err != nil {
			t.Fatalf("trial %d: agreeing calls ended the job: %v", trial, err)
		}
		if bad >= 0 && !errors.Is(err, ErrArg) {
			t.Fatalf("trial %d: rank %d disagreed at call %d of %d and the job ended with %v", trial, badRank, bad, n,
				err)
		}
		// The logs hold their communicators weakly and go once they are collected: without this the handles were
		// dead after the calls, and a collection before the looks dropped the disagreeing log (a CI run under
		// -race: "the job ended with <nil>").
		runtime.KeepAlive(comms)
	}
}

// TestCallCheckBadFrames: a malformed claim, or a rendezvous on the check's context, ends the job with
// ErrInternal: garbage from a socket, not a rank's disagreement.
func TestCallCheckBadFrames(t *testing.T) {
	for i, in := range []*device.Inbound{
		{Header: device.Header{Kind: device.KindEager, Context: checkCtx, Source: 2, Dest: 0}, Payload: []byte{1, 2}},
		{Header: device.Header{Kind: device.KindEager, Context: checkCtx, Source: 2, Dest: 0},
			Payload: make([]byte, claimLen)},
	} {
		p := newCheckPair(t)
		p.w[0].DeliverEager(in)
		if err := p.w[0].AbortCause(); !errors.Is(err, ErrInternal) {
			t.Errorf("frame %d: the job ended with %v, want ErrInternal", i, err)
		}
	}
	p := newCheckPair(t)
	p.w[0].DeliverRTS(&device.Header{Kind: device.KindRTS, Context: checkCtx, Source: 2, Dest: 0, Length: 8})
	if err := p.w[0].AbortCause(); !errors.Is(err, ErrInternal) {
		t.Errorf("RTS: the job ended with %v, want ErrInternal", err)
	}
}

// TestLogCallAllocs: noting and starting a call allocate nothing once the communicator's log exists.
func TestLogCallAllocs(t *testing.T) {
	p := newCheckPair(t)
	c := p.comm(0, 0)
	logCall(c, CallBcast, 0)
	if n := testing.AllocsPerRun(1000, func() { logCall(c, CallReduce, 1) }); n != 0 {
		t.Fatalf("%v allocations per call", n)
	}
}

// FuzzDecodeClaim: a claim's bytes come from another node process; whatever they are, decoding returns a claim
// that encodes back to them, or an error, and never panics.
func FuzzDecodeClaim(f *testing.F) {
	b := make([]byte, claimLen)
	encodeClaim(b, claim{id: 6 << 32, call: packCall(3, CallGather, 1), rank: 2})
	f.Add(b)
	f.Add(make([]byte, claimLen))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		cl, err := decodeClaim(b, 4)
		if err != nil {
			return
		}
		out := make([]byte, claimLen)
		encodeClaim(out, cl)
		if !slices.Equal(out, b) {
			t.Fatalf("decoded %x as %+v, which encodes as %x", b, cl, out)
		}
		if !validCall(cl.call) || cl.rank < 0 || cl.rank >= 4 {
			t.Fatalf("decoded an invalid claim %+v", cl)
		}
		_ = fmt.Sprint(callKind(cl.call), callRoot(cl.call))
	})
}

package nbc

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"unsafe"

	"github.com/gompj/gompj/collectives"
	"github.com/gompj/gompj/ranks"
)

// The schedule engine under a fake transport: every rank's machines run in this goroutine, on a simulated network
// that matches sends and receives by (source, destination, tag) in posting order, as MPI does, moves the data
// only when a pair matches (so a send whose buffer changed before its completion would deliver the change), and
// reveals completions in random order and at random times. Every message-based algorithm of every collective is
// checked against a reference computation, with several operations outstanding at once on the same ranks.

type key struct{ src, dst, tag int }

type fakeStep struct {
	rank, idx int
	st        *Step
	done      bool // completed on the network, maybe not visible yet
	visible   bool
	err       error
}

type fakeNet struct {
	rng    *rand.Rand
	sends  map[key][]*fakeStep
	recvs  map[key][]*fakeStep
	hidden []*fakeStep
	events int // posts and matches, to detect a fixpoint
}

func newFakeNet(seed int64) *fakeNet {
	return &fakeNet{rng: rand.New(rand.NewSource(seed)), sends: map[key][]*fakeStep{}, recvs: map[key][]*fakeStep{}}
}

type fakeTransport struct {
	net   *fakeNet
	rank  int
	steps map[int]*fakeStep
}

func (t *fakeTransport) Post(i int, st *Step) error {
	p := &fakeStep{rank: t.rank, idx: i, st: st}
	t.steps[i] = p
	t.net.events++
	switch st.Kind {
	case StepSend, StepSendObj:
		k := key{t.rank, st.Peer, st.Tag}
		t.net.sends[k] = append(t.net.sends[k], p)
	case StepRecv, StepRecvObj:
		k := key{st.Peer, t.rank, st.Tag}
		t.net.recvs[k] = append(t.net.recvs[k], p)
	case StepSub:
		return st.Sub.Begin()
	case StepWait:
	default:
		return fmt.Errorf("fake transport: cannot post %v", st.Kind)
	}
	return nil
}

func (t *fakeTransport) Test(i int, st *Step) (bool, error) {
	switch st.Kind {
	case StepWait:
		return st.Cond(), nil
	case StepSub:
		return st.Sub.Poll()
	}
	p := t.steps[i]
	return p.visible, p.err
}

// matchable returns the keys with a send and a receive waiting.
func (f *fakeNet) matchable() []key {
	var ks []key
	for k, s := range f.sends {
		if len(s) > 0 && len(f.recvs[k]) > 0 {
			ks = append(ks, k)
		}
	}
	slices.SortFunc(ks, func(a, b key) int { // map order is random anyway; sort so that seeds reproduce
		if a.src != b.src {
			return a.src - b.src
		}
		if a.dst != b.dst {
			return a.dst - b.dst
		}
		return a.tag - b.tag
	})
	return ks
}

func (f *fakeNet) match(k key) {
	s, r := f.sends[k][0], f.recvs[k][0]
	f.sends[k], f.recvs[k] = f.sends[k][1:], f.recvs[k][1:]
	f.events++
	switch {
	case s.st.Kind == StepSendObj && r.st.Kind == StepRecvObj:
		b, err := json.Marshal(s.st.Obj)
		if err == nil {
			err = json.Unmarshal(b, r.st.Obj)
		}
		r.err = err
	case s.st.Kind == StepSend && r.st.Kind == StepRecv:
		if len(s.st.Buf) > len(r.st.Buf) {
			r.err = fmt.Errorf("%w: %d bytes into %d", ranks.ErrTruncate, len(s.st.Buf), len(r.st.Buf))
		}
		copy(r.st.Buf, s.st.Buf)
	default:
		r.err = fmt.Errorf("%w: %v matched %v", ranks.ErrType, s.st.Kind, r.st.Kind)
	}
	s.done, r.done = true, true
	f.hidden = append(f.hidden, s, r)
}

func (f *fakeNet) reveal() {
	i := f.rng.Intn(len(f.hidden))
	f.hidden[i].visible = true
	f.hidden[i] = f.hidden[len(f.hidden)-1]
	f.hidden = f.hidden[:len(f.hidden)-1]
}

type fakeOp struct {
	m *Machine
	t *fakeTransport
}

// runFake drives ops (one list per rank) to completion in random order; it fails on a deadlock. It returns each
// op's error.
func runFake(t *testing.T, f *fakeNet, ops [][]fakeOp) [][]error {
	t.Helper()
	errs := make([][]error, len(ops))
	for r := range ops {
		errs[r] = make([]error, len(ops[r]))
	}
	pending := func() (list [][2]int) {
		for r := range ops {
			for j, o := range ops[r] {
				if done, _ := o.m.Done(); !done {
					list = append(list, [2]int{r, j})
				}
			}
		}
		return list
	}
	// What a spinning waiter watches (op.Spin) is the pending step its last run left (Machine.Pending): until that
	// step completes, no run may move the machine, or the waiter, looking only at it, would miss the move.
	type pendingStep struct {
		i  int
		st *Step
	}
	pend := make([][]pendingStep, len(ops))
	for r := range ops {
		pend[r] = make([]pendingStep, len(ops[r]))
	}
	progress := func(r, j int) {
		o := ops[r][j]
		if p := pend[r][j]; p.st != nil && p.st.Kind != StepSub { // (Test would poll a sub-operation)
			if ok, _ := o.t.Test(p.i, p.st); !ok {
				if !fixpoint(o) {
					t.Fatalf("rank %d op %d: moved on while its pending step %d (%v) had not completed", r, j, p.i, p.st.Kind)
				}
				return
			}
		}
		if done, err := o.m.Progress(o.t); done {
			errs[r][j] = err
			pend[r][j] = pendingStep{}
			return
		}
		i, st := o.m.Pending()
		if st == nil {
			t.Fatalf("rank %d op %d: not done and nothing pending", r, j)
		}
		pend[r][j] = pendingStep{i, st}
	}
	for steps := 0; ; steps++ {
		if steps > 1_000_000 {
			t.Fatal("no end after a million steps")
		}
		todo := pending()
		if len(todo) == 0 && len(f.hidden) == 0 {
			return errs
		}
		ks := f.matchable()
		switch x := f.rng.Intn(3); {
		case x == 0 && len(ks) > 0:
			f.match(ks[f.rng.Intn(len(ks))])
		case x == 1 && len(f.hidden) > 0:
			f.reveal()
		case len(todo) > 0:
			p := todo[f.rng.Intn(len(todo))]
			progress(p[0], p[1])
		}
		if left := pending(); len(left) > 0 && len(f.matchable()) == 0 && len(f.hidden) == 0 {
			// nothing in flight: progress everybody until nothing changes; if nothing is in flight then, the
			// pending operations wait for each other
			if stuck(ops, left) && len(f.matchable()) == 0 && len(f.hidden) == 0 {
				for _, p := range left {
					progress(p[0], p[1])
				}
				if len(pending()) > 0 {
					t.Fatalf("deadlock: operations %v pending with nothing in flight", pending())
				}
			}
		}
	}
}

// fixpoint progresses o once more and reports whether nothing changed.
func fixpoint(o fakeOp) bool {
	before := *o.m
	o.m.Progress(o.t)
	return before.round == o.m.round && before.posted == o.m.posted && before.head == o.m.head && before.pc == o.m.pc &&
		len(before.det) == len(o.m.det) && before.done == o.m.done
}

// stuck progresses every pending op until a whole pass changes nothing, and reports whether they are still pending.
func stuck(ops [][]fakeOp, left [][2]int) bool {
	for {
		changed := false
		for _, p := range left {
			if !fixpoint(ops[p[0]][p[1]]) {
				changed = true
			}
		}
		if !changed {
			for _, p := range left {
				if done, _ := ops[p[0]][p[1]].m.Done(); !done {
					return true
				}
			}
			return false
		}
	}
}

// --- element types and ops of the model test ---

// sumK adds int32s; affK composes affine maps x -> a*x + b stored as int32 pairs (associative, not commutative),
// in MPI's order: inout = in o inout, in from the lower ranks.
func i32(b []byte) []int32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func sumK(inout, in []byte) {
	x, y := i32(inout), i32(in)
	for i := range x {
		x[i] += y[i]
	}
}

func affK(inout, in []byte) {
	x, y := i32(inout), i32(in)
	for i := 0; i+1 < len(x); i += 2 {
		a, b := y[i], y[i+1]      // in: lower ranks
		c, d := x[i], x[i+1]      // inout
		x[i], x[i+1] = a*c, a*d+b // in o inout
	}
}

// elem is the test's element: a pair of int32 (8 bytes), so that affK works on whole elements.
const esz = 8

func data(rank, salt, elems int) []byte {
	b := make([]byte, elems*esz)
	v := i32(b)
	for i := range v {
		v[i] = int32((rank*131+salt*17+i*7)%11 + 1)
	}
	return b
}

func fold(k Kernel, parts [][]byte) []byte {
	out := slices.Clone(parts[len(parts)-1])
	for i := len(parts) - 2; i >= 0; i-- {
		k(out, parts[i]) // out = parts[i] o out
	}
	return out
}

// --- the model test ---

type modelCase struct {
	coll, algo string
	n, root    int
	elems      int
	inPlace    bool
	commute    bool
	salt       int
}

func (mc modelCase) String() string {
	return fmt.Sprintf("%s/%s n=%d root=%d elems=%d inplace=%v commute=%v", mc.coll, mc.algo, mc.n, mc.root,
		mc.elems, mc.inPlace, mc.commute)
}

// setup builds every rank's call of mc and returns a checker that verifies the outputs afterwards.
func (mc modelCase) setup(rng *rand.Rand) (calls []*collectives.Call, check func() error) {
	n, e := mc.n, mc.elems
	calls = make([]*collectives.Call, n)
	k, comm := Kernel(affK), false
	if mc.commute {
		k, comm = sumK, true
	}
	in, long := make([][]byte, n), make([][]byte, n) // e elements; e+1 for the v variants' counts
	for r := range in {
		long[r] = data(r, mc.salt, e+1)
		in[r] = long[r][:e*esz]
	}
	// counts for the v variants: a random number of elements per rank, placed at random in the buffer
	counts, displs := make([]int, n), make([]int, n)
	total := 0
	for r := range counts {
		counts[r] = rng.Intn(e + 2)
		total += counts[r]
	}
	perm := rng.Perm(n)
	off := 0
	for _, r := range perm {
		displs[r] = off
		off += counts[r] + rng.Intn(2) // gaps
	}
	span := off
	base := collectives.Call{Coll: mc.coll, Root: mc.root, InPlace: mc.inPlace, Sz: esz, Kernel: k, Commutative: comm}
	var want [][]byte
	var got func(r int) []byte
	switch mc.coll {
	case "barrier":
		for r := range calls {
			c := base
			calls[r] = &c
		}
		return calls, func() error { return nil }
	case "bcast":
		bufs := make([][]byte, n)
		for r := range bufs {
			bufs[r] = make([]byte, e*esz)
			if r == mc.root {
				copy(bufs[r], in[r])
			}
			c := base
			c.Recv = bufs[r]
			calls[r] = &c
			want = append(want, in[mc.root])
		}
		got = func(r int) []byte { return bufs[r] }
	case "reduce", "allreduce", "scan", "exscan":
		bufs := make([][]byte, n)
		for r := range bufs {
			c := base
			c.Send = in[r]
			if mc.coll != "reduce" || r == mc.root {
				bufs[r] = make([]byte, e*esz)
				c.Recv = bufs[r]
				if mc.inPlace {
					copy(bufs[r], in[r])
					c.Send = c.Recv
				}
			}
			calls[r] = &c
			switch mc.coll {
			case "reduce", "allreduce":
				want = append(want, fold(k, in))
			case "scan":
				want = append(want, fold(k, in[:r+1]))
			case "exscan":
				if r == 0 {
					w := make([]byte, e*esz) // untouched
					if mc.inPlace {
						w = in[0]
					}
					want = append(want, w)
				} else {
					want = append(want, fold(k, in[:r]))
				}
			}
		}
		if mc.coll == "reduce" {
			w := want[mc.root]
			want = make([][]byte, n)
			want[mc.root] = w
		}
		got = func(r int) []byte { return bufs[r] }
	case "gather", "gatherv", "allgather", "allgatherv":
		v := mc.coll == "gatherv" || mc.coll == "allgatherv"
		all := mc.coll == "allgather" || mc.coll == "allgatherv"
		size := n * e * esz
		if v {
			size = span * esz
		}
		ref := make([]byte, size)
		for r := 0; r < n; r++ {
			if v {
				copy(ref[displs[r]*esz:], long[r][:counts[r]*esz])
			} else {
				copy(ref[r*e*esz:], in[r])
			}
		}
		bufs := make([][]byte, n)
		for r := range bufs {
			c := base
			c.Send = in[r]
			if v {
				c.Send = long[r][:counts[r]*esz]
				c.Counts, c.Displs = counts, displs
			} else {
				c.Blk = e * esz
			}
			if all || r == mc.root {
				bufs[r] = make([]byte, size)
				c.Recv = bufs[r]
				if mc.inPlace {
					copy(bufs[r], ref) // only this rank's block matters: poison the others', which must be overwritten
					for q := 0; q < n; q++ {
						for i := range bufs[r] {
							if q != r && ownByte(i, q, v, counts, displs, e) {
								bufs[r][i] = 0xee
							}
						}
					}
					c.Send = nil
				}
				want = append(want, ref)
			} else {
				want = append(want, nil)
			}
			calls[r] = &c
		}
		got = func(r int) []byte { return bufs[r] }
	case "scatter", "scatterv":
		v := mc.coll == "scatterv"
		src := make([]byte, n*e*esz)
		if v {
			src = make([]byte, span*esz)
		}
		for i := range src {
			src[i] = byte(i*5 + mc.salt)
		}
		bufs := make([][]byte, n)
		for r := range bufs {
			c := base
			var blk []byte
			if v {
				blk = src[displs[r]*esz : (displs[r]+counts[r])*esz]
				c.Counts, c.Displs = counts, displs
			} else {
				blk = src[r*e*esz : (r+1)*e*esz]
				c.Blk = e * esz
			}
			if r == mc.root {
				c.Send = src
			}
			if mc.inPlace && r == mc.root {
				want = append(want, nil)
			} else {
				bufs[r] = make([]byte, len(blk))
				c.Recv = bufs[r]
				want = append(want, blk)
			}
			if mc.inPlace && r == mc.root {
				c.Recv = nil
			} else {
				c.InPlace = false
			}
			calls[r] = &c
		}
		got = func(r int) []byte { return bufs[r] }
	case "alltoall", "alltoallv":
		v := mc.coll == "alltoallv"
		// block i->j: e elements (alltoall) or counts[(i+j)%n] (alltoallv), at displs in send and receive
		cnt := func(i, j int) int {
			if v {
				return counts[(i+j)%n]
			}
			return e
		}
		blockData := func(i, j int) []byte {
			b := make([]byte, cnt(i, j)*esz)
			for x := range b {
				b[x] = byte(i*37 + j*11 + x + mc.salt)
			}
			return b
		}
		bufs := make([][]byte, n)
		for r := 0; r < n; r++ {
			c := base
			sc, sd, rc, rd := make([]int, n), make([]int, n), make([]int, n), make([]int, n)
			so, ro := 0, 0
			for j := 0; j < n; j++ {
				sc[j], rc[j] = cnt(r, j), cnt(j, r)
				sd[j], rd[j] = so, ro
				so += sc[j] + 1
				ro += rc[j]
			}
			send := make([]byte, so*esz)
			recv := make([]byte, ro*esz)
			ref := make([]byte, ro*esz)
			for j := 0; j < n; j++ {
				copy(send[sd[j]*esz:], blockData(r, j))
				copy(ref[rd[j]*esz:], blockData(j, r))
			}
			if v {
				c.Send, c.Counts, c.Displs, c.RCounts, c.RDispls = send, sc, sd, rc, rd
			} else {
				send = make([]byte, n*e*esz)
				for j := 0; j < n; j++ {
					copy(send[j*e*esz:], blockData(r, j))
				}
				c.Send, c.Blk = send, e*esz
				if mc.inPlace {
					copy(recv, send)
					c.Send = nil
				}
			}
			bufs[r] = recv
			c.Recv = recv
			calls[r] = &c
			want = append(want, ref)
		}
		got = func(r int) []byte { return bufs[r] }
	case "reduce_scatter":
		tot := 0
		for _, x := range counts {
			tot += x
		}
		vec := make([][]byte, n)
		for r := range vec {
			vec[r] = data(r, mc.salt, tot)
		}
		ref := fold(k, vec)
		bufs := make([][]byte, n)
		o := 0
		for r := 0; r < n; r++ {
			c := base
			c.Counts = counts
			c.Send = vec[r]
			bufs[r] = make([]byte, counts[r]*esz)
			if mc.inPlace {
				bufs[r] = slices.Clone(vec[r])
				c.Send = bufs[r]
			}
			c.Recv = bufs[r]
			calls[r] = &c
			want = append(want, ref[o*esz:(o+counts[r])*esz])
			o += counts[r]
		}
		got = func(r int) []byte { return bufs[r][:counts[r]*esz] }
	default:
		panic(mc.coll)
	}
	return calls, func() error {
		for r := 0; r < n; r++ {
			if want[r] == nil {
				continue
			}
			if g := got(r); !slices.Equal(g, want[r]) {
				return fmt.Errorf("rank %d: got %v, want %v", r, i32(g), i32(want[r]))
			}
		}
		return nil
	}
}

// ownByte reports whether byte i of a gather's receive buffer belongs to rank r's block.
func ownByte(i, r int, v bool, counts, displs []int, e int) bool {
	if v {
		return i >= displs[r]*esz && i < (displs[r]+counts[r])*esz
	}
	return i >= r*e*esz && i < (r+1)*e*esz
}

var modelAlgos = map[string][]string{
	"barrier":        {"dissemination"},
	"bcast":          {"binomial", "linear", "scatter_allgather"},
	"reduce":         {"binomial"},
	"allreduce":      {"recursive_doubling", "rabenseifner", "ring", "reduce_bcast"},
	"gather":         {"linear", "binomial"},
	"gatherv":        {"linear"},
	"scatter":        {"linear", "binomial"},
	"scatterv":       {"linear"},
	"allgather":      {"ring", "recursive_doubling", "bruck"},
	"allgatherv":     {"ring"},
	"alltoall":       {"pairwise", "linear", "bruck"},
	"alltoallv":      {"pairwise", "linear"},
	"reduce_scatter": {"reduce_scatterv", "ring"},
	"scan":           {"chain"},
	"exscan":         {"chain"},
}

var inPlaceOK = map[string]bool{"reduce": true, "allreduce": true, "gather": true, "gatherv": true,
	"scatter": true, "scatterv": true, "allgather": true, "allgatherv": true, "alltoall": true,
	"reduce_scatter": true, "scan": true, "exscan": true}

func randomCase(rng *rand.Rand) modelCase {
	colls := make([]string, 0, len(modelAlgos))
	for c := range modelAlgos {
		colls = append(colls, c)
	}
	slices.Sort(colls)
	mc := modelCase{coll: colls[rng.Intn(len(colls))], n: 1 + rng.Intn(9), salt: rng.Intn(100)}
	algos := modelAlgos[mc.coll]
	mc.algo = algos[rng.Intn(len(algos))]
	mc.root = rng.Intn(mc.n)
	mc.elems = []int{0, 1, 2, 3, 7, 33}[rng.Intn(6)]
	mc.commute = rng.Intn(2) == 0
	if mc.algo == "ring" || mc.algo == "rabenseifner" {
		mc.commute = true
	}
	mc.inPlace = inPlaceOK[mc.coll] && rng.Intn(3) == 0 // rooted collectives: at the root only (TestModel)
	return mc
}

// TestModel runs random sets of outstanding operations on the fake network and checks every result. Some
// operations use the shared-memory algorithm: their members share a ring of one to three slots, so that later
// operations queue for slots held by earlier ones.
func TestModel(t *testing.T) {
	trials := 3000
	if testing.Short() {
		trials = 400
	}
	for trial := 0; trial < trials; trial++ {
		seed := int64(trial)
		rng := rand.New(rand.NewSource(seed))
		n := 1 + rng.Intn(9)
		nops := 1 + rng.Intn(4)
		var cases []modelCase
		var checks []func() error
		ops := make([][]fakeOp, n)
		f := newFakeNet(seed)
		ring := make([]*slot, 1+rng.Intn(3))
		for i := range ring {
			ring[i] = newSlot(n)
		}
		shmOps := 0 // shared-memory operations so far: every member counts them alike
		for j := 0; j < nops; j++ {
			mc := randomCase(rng)
			mc.n = n
			mc.root %= n
			if n > 1 && rng.Intn(2) == 0 {
				mc.algo = "shm"
			}
			calls, check := mc.setup(rng)
			spinSoon := rng.Intn(2) == 0 // the members' waits for the others' finishes spun on or not: the same result
			cases = append(cases, mc)
			checks = append(checks, check)
			for r := 0; r < n; r++ {
				c := calls[r]
				if mc.inPlace && r != mc.root && (mc.coll == "gather" || mc.coll == "gatherv" || mc.coll == "scatter" || mc.coll == "scatterv" || mc.coll == "reduce") {
					c.InPlace = false
				}
				s := &Schedule{}
				sp := &spec{algo: mc.algo, rank: r, n: n, id: collectives.OpID(j + 1), a: c}
				var err error
				if mc.algo == "shm" {
					err = buildShmSlot(s, sp, ring[shmOps%len(ring)], uint64(shmOps/len(ring)+1), nil, false, spinSoon)
				} else {
					err = buildP2P(s, sp)
				}
				if err != nil {
					t.Fatalf("seed %d: %v: build: %v", seed, mc, err)
				}
				ops[r] = append(ops[r], fakeOp{m: NewMachine(s), t: &fakeTransport{net: f, rank: r, steps: map[int]*fakeStep{}}})
			}
			if mc.algo == "shm" {
				shmOps++
			}
		}
		errs := runFake(t, f, ops)
		for j, mc := range cases {
			for r := 0; r < n; r++ {
				if errs[r][j] != nil {
					t.Fatalf("seed %d: %v: rank %d: %v", seed, mc, r, errs[r][j])
				}
			}
			if err := checks[j](); err != nil {
				t.Fatalf("seed %d: %v (op %d of %d): %v", seed, mc, j+1, nops, err)
			}
		}
	}
}

// TestMachineErrorWaitsForPosted: a failed step stops the schedule, but the operation ends only once every step
// it posted has completed, whatever the order the completions come in.
func TestMachineErrorWaitsForPosted(t *testing.T) {
	s := &Schedule{}
	s.Recv(make([]byte, 1), 1, 5) // will be truncated
	s.Recv(make([]byte, 4), 2, 5)
	s.SendDetached([]byte{1}, 3, 5)
	s.Round()
	s.Send([]byte{2}, 1, 6) // never posted: the round before failed
	m := NewMachine(s)
	tr := &scriptTransport{done: map[int]bool{}, errs: map[int]error{0: ranks.ErrTruncate}}
	if done, _ := m.Progress(tr); done {
		t.Fatal("done before any completion")
	}
	if got := tr.posted; !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("posted %v, want the first round's steps", got)
	}
	for _, order := range [][]int{{0}, {2}, {1}} {
		for _, i := range order {
			tr.done[i] = true
		}
		done, err := m.Progress(tr)
		if i := order[0]; i != 1 && done {
			t.Fatalf("done with step 1 still pending (after %d)", i)
		}
		if order[0] == 1 {
			if !done || !errors.Is(err, ranks.ErrTruncate) {
				t.Fatalf("got done=%v err=%v, want the truncation", done, err)
			}
		}
	}
	if slices.Contains(tr.posted, 3) {
		t.Fatal("a round after the failed one was posted")
	}
	// a reset machine runs the schedule again from the start
	m.Reset()
	tr.errs, tr.done, tr.posted = map[int]error{}, map[int]bool{0: true, 1: true, 2: true, 3: true}, nil
	if done, err := m.Progress(tr); !done || err != nil {
		t.Fatalf("rerun: done=%v err=%v", done, err)
	}
	if !slices.Equal(tr.posted, []int{0, 1, 2, 3}) {
		t.Fatalf("rerun posted %v", tr.posted)
	}
}

// TestMachineOwes: a failure that leaves message steps unposted (peers wait on them) comes out as an OwedError;
// one after which the schedule has nothing left to post, or only local steps, comes out as it is.
func TestMachineOwes(t *testing.T) {
	build := func(after func(s *Schedule)) *Schedule {
		s := &Schedule{}
		s.Recv(make([]byte, 1), 1, 5)
		s.Round()
		if after != nil {
			after(s)
		}
		return s
	}
	for _, tc := range []struct {
		name  string
		after func(s *Schedule)
		owed  bool
	}{
		{"nothing after", nil, false},
		{"a local step after", func(s *Schedule) { s.Copy(make([]byte, 1), make([]byte, 1)) }, false},
		{"a send after", func(s *Schedule) { s.Send([]byte{1}, 2, 5) }, true},
		{"a receive after", func(s *Schedule) { s.Recv(make([]byte, 1), 2, 5) }, true},
		{"a copy, then a send", func(s *Schedule) { s.Copy(nil, nil); s.Send(nil, 2, 5) }, true},
	} {
		m := NewMachine(build(tc.after))
		tr := &scriptTransport{done: map[int]bool{0: true}, errs: map[int]error{0: ranks.ErrTruncate}}
		done, err := m.Progress(tr)
		var ow *OwedError
		if !done || !errors.Is(err, ranks.ErrTruncate) || errors.As(err, &ow) != tc.owed {
			t.Errorf("%s: done=%v err=%v (%T), want the truncation, owed=%v", tc.name, done, err, err, tc.owed)
		}
		if len(tr.posted) != 1 {
			t.Errorf("%s: posted %v after the failure", tc.name, tr.posted)
		}
	}
	// A step of the failed round that could not be posted is owed too.
	s := &Schedule{}
	s.Send([]byte{1}, 1, 5)
	s.Send([]byte{1}, 2, 5)
	m := NewMachine(s)
	if done, err := m.Progress(&failSecond{}); !done || !errors.As(err, new(*OwedError)) {
		t.Errorf("a send that could not be posted: done=%v err=%v, want an OwedError", done, err)
	}
}

// failSecond is a transport whose second post fails; the first completes at once.
type failSecond struct{ n int }

func (f *failSecond) Post(i int, st *Step) error {
	if f.n++; f.n == 2 {
		return ranks.ErrTruncate
	}
	return nil
}

func (f *failSecond) Test(i int, st *Step) (bool, error) { return true, nil }

// TestScheduleRounds: local steps after communication open a round; Round never makes an empty one.
func TestScheduleRounds(t *testing.T) {
	s := &Schedule{}
	s.Round()
	s.Copy(nil, nil)
	s.Send(nil, 1, 1)
	s.Recv(nil, 1, 1)
	s.ReduceLeft(sumK, nil, nil) // opens round 2
	s.Round()
	s.Round()
	s.Send(nil, 1, 1)
	if s.Rounds() != 3 {
		t.Fatalf("%d rounds, want 3", s.Rounds())
	}
	for r, want := range [][2]int{{0, 3}, {3, 4}, {4, 5}} {
		if lo, hi := s.round(r); lo != want[0] || hi != want[1] {
			t.Errorf("round %d is [%d,%d), want %v", r, lo, hi, want)
		}
	}
}

type scriptTransport struct {
	posted []int
	done   map[int]bool
	errs   map[int]error
}

func (s *scriptTransport) Post(i int, st *Step) error {
	s.posted = append(s.posted, i)
	return nil
}

func (s *scriptTransport) Test(i int, st *Step) (bool, error) { return s.done[i], s.errs[i] }

// pollSub is a sub-operation that counts its polls and is done once told.
type pollSub struct {
	polls int
	done  bool
}

func (p *pollSub) Begin() error        { return nil }
func (p *pollSub) Poll() (bool, error) { p.polls++; return p.done, nil }

// subTransport is scriptTransport that polls sub-operations, as the real transport does.
type subTransport struct{ scriptTransport }

func (s *subTransport) Test(i int, st *Step) (bool, error) {
	if st.Kind == StepSub {
		return st.Sub.Poll()
	}
	return s.scriptTransport.Test(i, st)
}

// TestSubsRunBeside: the sub-operations of one round move together: one after a sub-operation still pending is
// polled too (its first sends go out at once), and the round ends once both are done.
func TestSubsRunBeside(t *testing.T) {
	first, second := &pollSub{}, &pollSub{}
	s := &Schedule{}
	s.Run(first)
	s.Run(second)
	s.Round()
	s.Send(nil, 1, 1)
	m := NewMachine(s)
	tr := &subTransport{scriptTransport{done: map[int]bool{}, errs: map[int]error{}}}
	for range 3 {
		if done, _ := m.Progress(tr); done {
			t.Fatal("done with the first sub-operation pending")
		}
	}
	if second.polls < 3 {
		t.Fatalf("the second sub-operation was polled %d times in 3 runs while the first was pending", second.polls)
	}
	if slices.Contains(tr.posted, 2) {
		t.Fatal("the next round started with the first sub-operation pending")
	}
	first.done, second.done = true, true
	if done, _ := m.Progress(tr); done || !slices.Contains(tr.posted, 2) {
		t.Fatalf("done=%v posted %v: the next round should be posted and pending", done, tr.posted)
	}
	tr.done[2] = true
	if done, err := m.Progress(tr); !done || err != nil {
		t.Fatalf("done=%v err=%v", done, err)
	}
}

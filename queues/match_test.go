package queues

import (
	"math/rand"
	"testing"
)

// The reference matcher: two slices in order, linear scans, MPI rules written as plainly as possible.
type refEntry struct {
	id  int
	env Envelope
}

type reference struct {
	posted, unexpected []refEntry
}

func (r *reference) arrive(id int, env Envelope) (matched int) {
	for i, p := range r.posted {
		if p.env.Ctx == env.Ctx && (p.env.Src == AnySource || p.env.Src == env.Src) &&
			(p.env.Tag == AnyTag || p.env.Tag == env.Tag) {
			r.posted = append(r.posted[:i], r.posted[i+1:]...)
			return p.id
		}
	}
	r.unexpected = append(r.unexpected, refEntry{id, env})
	return -1
}

func (r *reference) post(id int, env Envelope) (matched int) {
	for i, m := range r.unexpected {
		if m.env.Ctx == env.Ctx && (env.Src == AnySource || env.Src == m.env.Src) &&
			(env.Tag == AnyTag || env.Tag == m.env.Tag) {
			r.unexpected = append(r.unexpected[:i], r.unexpected[i+1:]...)
			return m.id
		}
	}
	r.posted = append(r.posted, refEntry{id, env})
	return -1
}

type entry struct {
	Item
	id int
}

func TestMatchingAgainstReference(t *testing.T) {
	for seed := int64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewSource(seed))
		var ref reference
		var posted Posted
		var unexp Unexpected
		nctx, nsrc, ntag := 1+rng.Intn(3), 1+rng.Intn(4), 1+rng.Intn(4)
		wildP := rng.Float64() * 0.5
		for op := 0; op < 400; op++ {
			id := op
			ctx := uint32(rng.Intn(nctx))
			src := int32(rng.Intn(nsrc))
			tag := int32(rng.Intn(ntag))
			if rng.Intn(2) == 0 { // a message arrives
				env := Envelope{ctx, src, tag}
				want := ref.arrive(id, env)
				got := -1
				if it := posted.Take(env); it != nil {
					got = (*entry)(ptrOf(it)).id
				} else {
					e := &entry{id: id}
					e.Env = env
					unexp.Push(&e.Item)
				}
				if got != want {
					t.Fatalf("seed %d op %d: message %v matched receive %d, reference says %d", seed, op, env, got, want)
				}
			} else { // a receive is posted
				if rng.Float64() < wildP {
					src = AnySource
				}
				if rng.Float64() < wildP {
					tag = AnyTag
				}
				env := Envelope{ctx, src, tag}
				want := ref.post(id, env)
				got := -1
				if it := unexp.Take(ctx, src, tag); it != nil {
					got = (*entry)(ptrOf(it)).id
				} else {
					e := &entry{id: id}
					e.Env = env
					posted.Push(&e.Item)
				}
				if got != want {
					t.Fatalf("seed %d op %d: receive %v matched message %d, reference says %d", seed, op, env, got, want)
				}
			}
			if posted.Len() != len(ref.posted) || unexp.Len() != len(ref.unexpected) {
				t.Fatalf("seed %d op %d: lengths %d/%d, reference %d/%d", seed, op,
					posted.Len(), unexp.Len(), len(ref.posted), len(ref.unexpected))
			}
		}
	}
}

func TestFindDoesNotRemove(t *testing.T) {
	var u Unexpected
	e := &entry{id: 1}
	e.Env = Envelope{0, 3, 7}
	u.Push(&e.Item)
	if u.Find(0, AnySource, AnyTag) != &e.Item || u.Find(0, 3, 7) != &e.Item || u.Len() != 1 {
		t.Fatal("Find must see the message and leave it queued")
	}
	if u.Find(1, 3, 7) != nil || u.Find(0, 2, 7) != nil || u.Find(0, 3, 8) != nil {
		t.Fatal("Find matched a different context, source or tag")
	}
}

func TestQueueOpsAllocateNothing(t *testing.T) {
	var p Posted
	var u Unexpected
	es := make([]entry, 4)
	for i := range es {
		es[i].Env = Envelope{0, int32(i % 2), 5}
	}
	// Warm the bins.
	for i := range es {
		u.Push(&es[i].Item)
	}
	for range es {
		u.Take(0, AnySource, AnyTag)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		p.Push(&es[0].Item)
		p.Take(Envelope{0, 0, 5})
		u.Push(&es[1].Item)
		u.Take(0, 1, 5)
	})
	if allocs != 0 {
		t.Fatalf("queue operations allocate %v times per run", allocs)
	}
}

func BenchmarkPostedPushTake(b *testing.B) {
	var p Posted
	e := &entry{}
	e.Env = Envelope{0, 1, 0}
	for i := 0; i < b.N; i++ {
		p.Push(&e.Item)
		p.Take(e.Env)
	}
}

// Forget drops the empty bins of the contexts it is given (a freed communicator's), and keeps bins that still hold
// entries and every other context's; matching goes on as before, making bins afresh.
func TestForgetDropsEmptyBins(t *testing.T) {
	var u Unexpected
	var p Posted
	items := make([]*entry, 6)
	for i := range items {
		items[i] = &entry{id: i}
		items[i].Env = Envelope{Ctx: uint32(2 + 2*(i%2)), Src: int32(i), Tag: 1} // contexts 2 and 4
		u.Push(&items[i].Item)
	}
	for _, i := range []int{0, 1, 2, 3} { // every context-2 source but 4, and ctx 4's sources 1 and 3, are matched
		if u.Take(items[i].Env.Ctx, items[i].Env.Src, 1) != &items[i].Item {
			t.Fatalf("message %d not taken", i)
		}
	}
	recv := &entry{id: 9}
	recv.Env = Envelope{Ctx: 2, Src: 7, Tag: 1}
	p.Push(&recv.Item)
	p.Remove(&recv.Item)
	ctx2 := func(ctx uint32) bool { return ctx == 2 }
	u.Forget(ctx2)
	p.Forget(ctx2)
	for k, b := range u.bins.m {
		if uint32(k>>32) == 2 && b.head == nil {
			t.Errorf("an empty bin of context 2 (source %d) is left", int32(k))
		}
	}
	if len(u.bins.m) != 4 { // ctx 2 source 4 (queued), ctx 4 sources 1, 3 (empty, kept) and 5 (queued)
		t.Errorf("%d bins left, want 4", len(u.bins.m))
	}
	if len(p.bins.m) != 0 {
		t.Errorf("%d posted bins left, want 0", len(p.bins.m))
	}
	if u.Take(2, 4, 1) != &items[4].Item || u.Take(4, 5, 1) != &items[5].Item {
		t.Fatal("a queued message was lost with its context's empty bins")
	}
	again := &entry{id: 10}
	again.Env = Envelope{Ctx: 2, Src: 0, Tag: 1}
	u.Push(&again.Item)
	if u.Take(2, 0, 1) != &again.Item || u.Len() != 0 {
		t.Fatal("a message of a forgotten context is not matched")
	}
}

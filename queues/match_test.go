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

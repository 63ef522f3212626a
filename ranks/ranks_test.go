package ranks

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"unsafe"

	"github.com/gompj/gompj/queues"
)

func world(t *testing.T, np int) *World {
	t.Helper()
	w, err := NewWorld(Options{Size: np, Lo: 0, Hi: np, EagerLimit: 64 << 10, Policy: queues.DefaultPolicy(np)})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// spmd runs body on every rank of w and returns the first error.
func spmd(w *World, body func(c *Comm) error) error {
	var wg sync.WaitGroup
	errs := make([]error, w.Size())
	for i := 0; i < w.Size(); i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if errs[i] = body(w.Comm(i)); errs[i] != nil {
				w.Abort(errs[i])
			}
		}(i)
	}
	wg.Wait()
	return errors.Join(errs...)
}

// twoStep is an Operation made of a receive then a send, as a nonblocking collective's schedule would be.
type twoStep struct {
	c     *Comm
	buf   []int
	peer  int
	stage int
	child *Request
}

func (o *twoStep) Progress() (bool, error) {
	for {
		if o.child != nil {
			if _, done, err := o.child.Test(); err != nil || !done {
				return err != nil, err
			}
		}
		var err error
		switch o.stage {
		case 0:
			o.child, err = o.c.Irecv(o.buf, o.peer, 1)
		case 1:
			o.buf[0]++
			o.child, err = o.c.Isend(o.buf, o.peer, 2)
		default:
			return true, nil
		}
		o.stage++
		if err != nil {
			return true, err
		}
	}
}

func (o *twoStep) Blocker() *queues.Completion {
	if o.child == nil {
		return nil
	}
	return CompletionOf(o.child)
}

// An Operation completes through a Request, and Waitall/Waitany/Test mix it with point-to-point requests.
func TestOperationRequests(t *testing.T) {
	w := world(t, 2)
	err := spmd(w, func(c *Comm) error {
		if c.Rank() == 1 {
			if err := c.Send([]int{41}, 0, 1); err != nil {
				return err
			}
			got := make([]int, 1)
			if _, err := c.Recv(got, 0, 2); err != nil || got[0] != 42 {
				return fmt.Errorf("got %v %v", got, err)
			}
			return c.Send([]int{7}, 0, 3)
		}
		op := w.NewOpRequest(&twoStep{c: c, buf: make([]int, 1), peer: 1})
		x := make([]int, 1)
		p2p, err := c.Irecv(x, 1, 3)
		if err != nil {
			return err
		}
		i, _, err := Waitany(nil, op, p2p)
		if err != nil || (i != 1 && i != 2) {
			return fmt.Errorf("Waitany: %d %v", i, err)
		}
		if err := Waitall(op, nil, p2p); err != nil {
			return err
		}
		if _, done, err := op.Test(); !done || err != nil || x[0] != 7 {
			return fmt.Errorf("after Waitall: %v %v %v", done, err, x)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

type deep struct {
	A [64]int64
	M map[string][]int
	P *deep
}

func grow(n int) int {
	var pad [256]byte
	if n == 0 {
		return int(pad[n])
	}
	return grow(n-1) + int(pad[n%256])
}

// Objects sent from values that live on the sender's stack survive the stack moving while they are encoded and
// queued: what is queued is a copy.
func TestObjectsFromTheStack(t *testing.T) {
	w := world(t, 2)
	err := spmd(w, func(c *Comm) error {
		if c.Rank() == 0 {
			for i := 0; i < 50; i++ {
				v := deep{M: map[string][]int{"k": {i}}, P: &deep{}}
				v.A[63], v.P.A[0] = int64(i), int64(-i)
				m := map[int]int{i: i * i}
				if err := c.Send(v, 1, 0); err != nil {
					return err
				}
				if err := c.Send(m, 1, 1); err != nil {
					return err
				}
				grow(200 + i) // move the stack
			}
			return nil
		}
		for i := 0; i < 50; i++ {
			grow(300)
			var v deep
			var m map[int]int
			if _, err := c.Recv(&v, 0, 0); err != nil {
				return err
			}
			if _, err := c.Recv(&m, 0, 1); err != nil {
				return err
			}
			if v.A[63] != int64(i) || v.P.A[0] != int64(-i) || v.M["k"][0] != i || m[i] != i*i {
				return fmt.Errorf("message %d arrived as %v %v %v", i, v.A[63], v.M, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Thousands of ranks: each owns little memory, and a ring pass completes.
func TestManyRanksMemory(t *testing.T) {
	const np = 10000
	if testing.Short() {
		t.Skip("short")
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	w := world(t, np)
	var measured sync.Once
	err := spmd(w, func(c *Comm) error {
		tok := []int64{0}
		next, prev := (c.Rank()+1)%np, (c.Rank()+np-1)%np
		for lap := 0; lap < 2; lap++ {
			if c.Rank() == 0 {
				if err := c.Send(tok, next, 0); err != nil {
					return err
				}
				if _, err := c.Recv(tok, prev, 0); err != nil {
					return err
				}
				if tok[0] != int64(lap+1)*(np-1) {
					return fmt.Errorf("lap %d: token %d", lap, tok[0])
				}
				if lap == 0 {
					// Every other rank is alive, blocked in its second lap's Recv.
					measured.Do(func() { runtime.ReadMemStats(&after) })
				}
				continue
			}
			if _, err := c.Recv(tok, prev, 0); err != nil {
				return err
			}
			tok[0]++
			if err := c.Send(tok, next, 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	perRank := (int64(after.HeapInuse+after.StackInuse) - int64(before.HeapInuse+before.StackInuse)) / np
	t.Logf("%d ranks: %d bytes per rank (heap + stacks)", np, perRank)
	if perRank > 64<<10 {
		t.Fatalf("%d bytes per rank, want under 64 KiB", perRank)
	}
}

// Disjoint groups from one Split share a context: each has its own shared objects, and freeing one group's
// communicator leaves the other's alone.
func TestSharedIsPerGroup(t *testing.T) {
	w := world(t, 4)
	objs := make([]*int, 4)
	err := spmd(w, func(c *Comm) error {
		half, err := c.Split(c.Rank()%2, 0)
		if err != nil {
			return err
		}
		color := c.Rank() % 2
		objs[c.Rank()] = w.Shared(half, "k", func() any { v := color; return &v }).(*int)
		if *objs[c.Rank()] != color {
			return fmt.Errorf("rank %d got group %d's object", c.Rank(), *objs[c.Rank()])
		}
		if err := c.Coll().Send([]byte{0}, 0, 1); err != nil { // everyone has its object before anyone frees
			return err
		}
		if c.Rank() == 0 {
			for i := 0; i < 4; i++ {
				if _, err := c.Coll().Recv(make([]byte, 1), AnySource, 1); err != nil {
					return err
				}
			}
			if err := half.Free(); err != nil {
				return err
			}
			if got := w.Shared(w.Comm(1), "probe", func() any { return 0 }); got != 0 {
				return fmt.Errorf("unexpected probe object %v", got)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if objs[0] != objs[2] || objs[1] != objs[3] || objs[0] == objs[1] {
		t.Fatal("groups did not get one object each")
	}
	// Group 1 (ranks 1, 3) still finds its object after group 0 freed its communicator.
	g1 := &Comm{r: w.ranks[1], w: w, size: 2, group: []int32{1, 3}, ctx: w.ranks[1].nextCtx*2 - 2}
	if got := w.Shared(g1, "k", func() any { v := -1; return &v }).(*int); got != objs[1] {
		t.Fatalf("freeing group 0 dropped group 1's object (got %d)", *got)
	}
}

// TestSharedOutlivesEarlyFree: a member that frees a communicator before another member made its first call on it
// (neighbourhood collectives do not meet every member) must not make the late one get a second object; the objects
// go once every member on the node has freed it.
func TestSharedOutlivesEarlyFree(t *testing.T) {
	w := world(t, 3)
	objs := make([]any, 3)
	err := spmd(w, func(c *Comm) error {
		d, err := c.Dup()
		if err != nil {
			return err
		}
		token := []byte{0}
		if c.Rank() > 0 { // one at a time, in rank order: each takes its object after the previous one freed
			if _, err := c.Recv(token, c.Rank()-1, 9); err != nil {
				return err
			}
		}
		objs[c.Rank()] = w.Shared(d, "k", func() any { return new(int) })
		if err := d.Free(); err != nil {
			return err
		}
		if c.Rank() < 2 {
			return c.Send(token, c.Rank()+1, 9)
		}
		// Everybody has freed it now: the object is gone.
		if w.Shared(d, "k", func() any { return new(int) }) == objs[0] {
			return fmt.Errorf("the shared object outlived every member's Free")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if objs[0] != objs[1] || objs[1] != objs[2] {
		t.Fatalf("members that came after an early Free got another object: %p %p %p", objs[0], objs[1], objs[2])
	}
}

// TestRequestLayout: what a matching sender touches (claim word, envelope, buffer, status, flag) is one cache
// line: the request is 256 bytes, a size class the allocator aligns to 64, and those fields come first.
func TestRequestLayout(t *testing.T) {
	var r request
	if s := unsafe.Sizeof(r); s != 256 {
		t.Fatalf("Request is %d bytes; keep it at 256 (adjust the padding)", s)
	}
	if end := unsafe.Offsetof(r.done) + unsafe.Sizeof(r.done); unsafe.Offsetof(r.claim) != 0 || end > 64 {
		t.Fatalf("claim word, envelope, buffer, status and completion span bytes 0..%d; they must fit in the first 64", end)
	}
	for range 100 {
		r := new(request)
		layoutSink = append(layoutSink, r) // on the heap, as requests are
		if p := uintptr(unsafe.Pointer(r)); p%64 != 0 {
			t.Fatalf("a Request allocated at %#x is not 64-byte aligned", p)
		}
	}
	layoutSink = nil
	// Requests carved from a rank's chunks (nonblocking calls) are aligned too.
	rk := world(t, 1).Comm(0).r
	for range 3 * reqChunkLen {
		if p := uintptr(unsafe.Pointer(rk.newReq(kindRecv))); p%64 != 0 {
			t.Fatalf("a chunk's request at %#x is not 64-byte aligned", p)
		}
	}
	if !chunksAligned.Load() {
		t.Fatal("reqChunk's padding no longer puts its requests on a line: they are being allocated one by one")
	}
}

// TestRankLayout: a sender's read-mostly line (the slot pointer) and the lock line are separate lines, and ranks
// are 64-byte aligned, so no rank's hot line is shared with another's.
func TestRankLayout(t *testing.T) {
	var r Rank
	if s := unsafe.Sizeof(r); s%64 != 0 {
		t.Fatalf("Rank is %d bytes; keep it a multiple of 64 (adjust the padding)", s)
	}
	if o := unsafe.Offsetof(r.mu); o != 64 {
		t.Fatalf("Rank.mu at offset %d; it must start the second line", o)
	}
	if o := unsafe.Offsetof(r.spare); o%64 != 0 || o < unsafe.Offsetof(r.probers)+unsafe.Sizeof(r.probers) {
		t.Fatalf("the owner's cold fields start at %d, not on a line of their own after the queues", o)
	}
	var keep []*Rank
	for range 100 {
		r := new(Rank)
		keep = append(keep, r)
		if p := uintptr(unsafe.Pointer(r)); p%64 != 0 {
			t.Fatalf("a Rank allocated at %#x is not 64-byte aligned", p)
		}
	}
	_ = keep
}

var layoutSink []*request

package gompj_test

import (
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gompj/gompj"
)

func run(t *testing.T, np int, body func(c *gompj.Comm) error) {
	t.Helper()
	if err := gompj.RunWith(gompj.Config{Ranks: np}, body); err != nil {
		t.Fatal(err)
	}
}

// tinyShare is a bound on each rank's unexpected messages from its own node so small (2 KiB, a handful of
// messages) that streams of small messages cross it all the time, turning eager sends into rendezvous.
const tinyShare = 2 << 10

// runShares runs body twice on np ranks of one node: under the default bound on unexpected messages, and under
// tinyShare.
func runShares(t *testing.T, np int, body func(c *gompj.Comm) error) {
	t.Helper()
	for _, share := range []int64{0, tinyShare} {
		if err := gompj.RunWith(gompj.Config{Ranks: np, UnexpectedShare: share}, body); err != nil {
			t.Fatalf("unexpected share %d: %v", share, err)
		}
	}
}

// Every primitive buffer type, eager and rendezvous, arrives intact with the right count.
func TestEveryBufferType(t *testing.T) {
	mk := func(n int) []any {
		b := make([]byte, n)
		i8 := make([]int8, n)
		i16 := make([]int16, n)
		i32 := make([]int32, n)
		i64 := make([]int64, n)
		u16 := make([]uint16, n)
		u32 := make([]uint32, n)
		u64 := make([]uint64, n)
		in := make([]int, n)
		u := make([]uint, n)
		f32 := make([]float32, n)
		f64 := make([]float64, n)
		c64 := make([]complex64, n)
		c128 := make([]complex128, n)
		bl := make([]bool, n)
		for i := 0; i < n; i++ {
			b[i], i8[i], i16[i], i32[i], i64[i] = byte(i), int8(i), int16(i), int32(i), int64(i)*1e10
			u16[i], u32[i], u64[i], in[i], u[i] = uint16(i), uint32(i), uint64(i)<<40, -i, uint(i)
			f32[i], f64[i], c64[i], c128[i], bl[i] = float32(i)/3, float64(i)/7, complex(float32(i), 1), complex(2, float64(i)), i%3 == 0
		}
		return []any{b, i8, i16, i32, i64, u16, u32, u64, in, u, f32, f64, c64, c128, bl}
	}
	for _, n := range []int{0, 1, 7, 8191, 8193, 100000} { // 100000 elements is above the 64 KiB switch for all types
		run(t, 2, func(c *gompj.Comm) error {
			want := mk(n)
			for i, w := range want {
				if c.Rank() == 0 {
					if err := c.Send(w, 1, i); err != nil {
						return err
					}
					continue
				}
				got := reflect.MakeSlice(reflect.TypeOf(w), n, n).Interface()
				st, err := c.Recv(got, 0, i)
				if err != nil {
					return err
				}
				if st.Count() != n || st.Source != 0 || st.Tag != i || !reflect.DeepEqual(got, w) {
					return fmt.Errorf("%T of %d: status %+v count %d, equal %v", w, n, st, st.Count(), reflect.DeepEqual(got, w))
				}
			}
			return nil
		})
	}
}

// A sub-slice sends exactly its window, and receives into exactly its window.
func TestSubSlices(t *testing.T) {
	run(t, 2, func(c *gompj.Comm) error {
		if c.Rank() == 0 {
			x := []float64{0, 1, 2, 3, 4, 5}
			return c.Send(x[2:5], 1, 0)
		}
		y := make([]float64, 8)
		st, err := c.Recv(y[3:7], 0, 0)
		if err != nil {
			return err
		}
		if st.Count() != 3 || !reflect.DeepEqual(y, []float64{0, 0, 0, 2, 3, 4, 0, 0}) {
			return fmt.Errorf("got %v count %d", y, st.Count())
		}
		return nil
	})
}

type particle struct {
	ID    int
	Pos   [3]float64
	Name  string
	Attrs map[string]int
}

func TestObjects(t *testing.T) {
	run(t, 2, func(c *gompj.Comm) error {
		p := particle{ID: 7, Pos: [3]float64{1, 2, 3}, Name: "p", Attrs: map[string]int{"a": 1}}
		big := make([]particle, 5000) // an object larger than the eager limit is still one eager message
		for i := range big {
			big[i].ID = i
		}
		if c.Rank() == 0 {
			if err := c.Send(p, 1, 1); err != nil { // by value
				return err
			}
			if err := c.Send(&p, 1, 2); err != nil { // by pointer
				return err
			}
			if err := c.Send(map[int]string{1: "one"}, 1, 3); err != nil {
				return err
			}
			if err := c.Send(big, 1, 4); err != nil {
				return err
			}
			return c.Ssend("hello", 1, 5)
		}
		var a, b particle
		if _, err := c.Recv(&a, 0, 1); err != nil {
			return err
		}
		if _, err := c.Recv(&b, 0, 2); err != nil {
			return err
		}
		var m map[int]string
		if _, err := c.Recv(&m, 0, 3); err != nil {
			return err
		}
		var gotBig []particle
		r, err := c.Irecv(&gotBig, 0, 4)
		if err != nil {
			return err
		}
		st, err := r.Wait()
		if err != nil {
			return err
		}
		var s string
		if _, err := c.Recv(&s, 0, 5); err != nil {
			return err
		}
		if !reflect.DeepEqual(a, p) || !reflect.DeepEqual(b, p) || m[1] != "one" || len(gotBig) != 5000 ||
			gotBig[4999].ID != 4999 || st.Count() != 1 || s != "hello" {
			return fmt.Errorf("objects differ: %+v %+v %v %d %q", a, b, m, len(gotBig), s)
		}
		return nil
	})
}

// Bad input gets the right error class, and the job goes on afterwards.
func TestBadInput(t *testing.T) {
	run(t, 2, func(c *gompj.Comm) error {
		other := 1 - c.Rank()
		type tc struct {
			name string
			call func() error
			want error
		}
		ch := make(chan int)
		cases := []tc{
			{"send to rank = size", func() error { return c.Send([]byte{1}, 2, 0) }, gompj.ErrRank},
			{"send to negative rank", func() error { return c.Send([]byte{1}, -5, 0) }, gompj.ErrRank},
			{"send to AnySource", func() error { return c.Send([]byte{1}, gompj.AnySource, 0) }, gompj.ErrRank},
			{"recv from rank = size", func() error { _, err := c.Recv([]byte{1}, 9, 0); return err }, gompj.ErrRank},
			{"send with negative tag", func() error { return c.Send([]byte{1}, other, -7) }, gompj.ErrTag},
			{"send with AnyTag", func() error { return c.Send([]byte{1}, other, gompj.AnyTag) }, gompj.ErrTag},
			{"recv with negative tag", func() error { _, err := c.Recv([]byte{1}, other, -3); return err }, gompj.ErrTag},
			{"isend bad rank", func() error { _, err := c.Isend([]byte{1}, 3, 0); return err }, gompj.ErrRank},
			{"irecv bad tag", func() error { _, err := c.Irecv([]byte{1}, 0, -9); return err }, gompj.ErrTag},
			{"probe bad rank", func() error { _, err := c.Probe(17, 0); return err }, gompj.ErrRank},
			{"iprobe bad tag", func() error { _, _, err := c.Iprobe(0, -2); return err }, gompj.ErrTag},
			{"send a channel", func() error { return c.Send(ch, other, 0) }, gompj.ErrBuffer},
			{"recv an object into a non-pointer", func() error { _, err := c.Recv(particle{}, other, 0); return err }, gompj.ErrBuffer},
			{"recv an object into a nil pointer", func() error { _, err := c.Recv((*particle)(nil), other, 0); return err }, gompj.ErrBuffer},
			{"split with a negative color", func() error { _, err := c.Split(-3, 0); return err }, gompj.ErrArg},
			{"free the world", func() error { return c.Free() }, gompj.ErrComm},
			{"wait on a nil request", func() error { _, err := (*gompj.Request)(nil).Wait(); return err }, gompj.ErrRequest},
		}
		for _, k := range cases {
			if err := k.call(); !errors.Is(err, k.want) {
				return fmt.Errorf("%s: got %v, want %v", k.name, err, k.want)
			}
		}
		// Type mismatch and truncation: the receive fails, the message is consumed, the next one is fine. A
		// truncated receive gets the part that fits. The data is patterned and non-zero, so a receive that
		// delivered nothing cannot pass.
		pattern := func(n int) []int32 {
			s := make([]int32, n)
			for i := range s {
				s[i] = int32(i*7919 + 1)
			}
			return s
		}
		if c.Rank() == 0 {
			for _, n := range []int{10, 1 << 17} { // eager and rendezvous
				if err := c.Send(pattern(n), 1, 1); err != nil {
					return err
				}
				if err := c.Send(pattern(n), 1, 2); err != nil {
					return err
				}
				if err := c.Send([]int32{42}, 1, 3); err != nil {
					return err
				}
				if err := c.Send(particle{ID: 1}, 1, 4); err != nil {
					return err
				}
			}
		} else {
			for _, n := range []int{10, 1 << 17} {
				if _, err := c.Recv(make([]float32, n), 0, 1); !errors.Is(err, gompj.ErrType) {
					return fmt.Errorf("int32 into float32: %v", err)
				}
				short := make([]int32, n-1)
				st, err := c.Recv(short, 0, 2)
				if !errors.Is(err, gompj.ErrTruncate) || st.Count() != n-1 || st.Source != 0 {
					return fmt.Errorf("truncation: %v, status %+v", err, st)
				}
				if !slices.Equal(short, pattern(n)[:n-1]) {
					return fmt.Errorf("truncation of %d elements: the %d that fit were not delivered", n, n-1)
				}
				ok := make([]int32, 1)
				if _, err := c.Recv(ok, 0, 3); err != nil || ok[0] != 42 {
					return fmt.Errorf("after errors: %v %v", ok, err)
				}
				if _, err := c.Recv(make([]byte, 100), 0, 4); !errors.Is(err, gompj.ErrType) {
					return fmt.Errorf("object into []byte: %v", err)
				}
			}
		}
		// Using a freed communicator is ErrComm.
		d, err := c.Dup()
		if err != nil {
			return err
		}
		if err := d.Free(); err != nil {
			return err
		}
		if err := d.Send([]byte{1}, other, 0); !errors.Is(err, gompj.ErrComm) {
			return fmt.Errorf("send on a freed comm: %v", err)
		}
		if err := d.Free(); !errors.Is(err, gompj.ErrComm) {
			return fmt.Errorf("double free: %v", err)
		}
		return nil
	})
}

// Messages between one pair on one communicator never overtake each other, whatever their sizes and protocols,
// and wildcard receives see them in order too, also when a bound on the receiver's queue turns some eager sends
// into rendezvous.
func TestNonOvertaking(t *testing.T) {
	sizes := []int{0, 5, 70000, 3, 1 << 18, 1, 65536, 65537}
	runShares(t, 3, func(c *gompj.Comm) error {
		switch c.Rank() {
		case 0, 1:
			for i, n := range sizes {
				b := make([]int32, n/4+1)
				b[0] = int32(i)
				if err := c.Send(b, 2, 5); err != nil {
					return err
				}
			}
			return nil
		}
		next := [2]int32{}
		for range 2 * len(sizes) {
			b := make([]int32, 1<<16+1)
			st, err := c.Recv(b, gompj.AnySource, gompj.AnyTag)
			if err != nil {
				return err
			}
			if b[0] != next[st.Source] {
				return fmt.Errorf("from %d got message %d, want %d", st.Source, b[0], next[st.Source])
			}
			next[st.Source]++
		}
		return nil
	})
}

// Receives match in posting order: two receives that both match take the messages in order.
func TestReceivesMatchInPostingOrder(t *testing.T) {
	run(t, 2, func(c *gompj.Comm) error {
		if c.Rank() == 0 {
			for i := 0; i < 4; i++ {
				if err := c.Send([]int{i}, 1, 10+i); err != nil {
					return err
				}
			}
			return nil
		}
		bufs := make([][]int, 4)
		reqs := make([]*gompj.Request, 4)
		for i := range reqs {
			bufs[i] = make([]int, 1)
			src, tag := 0, gompj.AnyTag
			if i%2 == 1 {
				src = gompj.AnySource
			}
			r, err := c.Irecv(bufs[i], src, tag)
			if err != nil {
				return err
			}
			reqs[i] = r
		}
		for i := range bufs {
			st, err := reqs[i].Wait() // reports each request once: a second Wait would see it inactive
			if err != nil {
				return err
			}
			if bufs[i][0] != i || st.Tag != 10+i {
				return fmt.Errorf("receive %d got message %d (tag %d)", i, bufs[i][0], st.Tag)
			}
		}
		return nil
	})
}

func TestSsendWaitsForTheMatch(t *testing.T) {
	run(t, 2, func(c *gompj.Comm) error {
		if c.Rank() == 0 {
			r, err := c.Issend([]byte{1}, 1, 0)
			if err != nil {
				return err
			}
			if _, done, _ := r.Test(); done {
				return errors.New("Issend completed before any receive was posted")
			}
			if err := c.Send([]byte{0}, 1, 1); err != nil { // tell rank 1 to receive now
				return err
			}
			_, err = r.Wait()
			return err
		}
		if _, err := c.Recv(make([]byte, 1), 0, 1); err != nil {
			return err
		}
		_, err := c.Recv(make([]byte, 1), 0, 0)
		return err
	})
}

func TestSendToSelfAndProcNull(t *testing.T) {
	run(t, 1, func(c *gompj.Comm) error {
		big := make([]float64, 1<<17)
		big[5] = 5
		r, err := c.Isend(big, 0, 3)
		if err != nil {
			return err
		}
		got := make([]float64, 1<<17)
		if _, err := c.Recv(got, 0, 3); err != nil || got[5] != 5 {
			return fmt.Errorf("self: %v", err)
		}
		if _, err := r.Wait(); err != nil {
			return err
		}
		if err := c.Send([]byte{1}, gompj.ProcNull, 0); err != nil {
			return err
		}
		st, err := c.Recv(make([]byte, 1), gompj.ProcNull, 0)
		if err != nil || st.Source != gompj.ProcNull || st.Count() != 0 {
			return fmt.Errorf("ProcNull: %+v %v", st, err)
		}
		_, err = c.Sendrecv([]int{1}, 0, 9, make([]int, 1), 0, 9)
		return err
	})
}

func TestProbe(t *testing.T) {
	run(t, 2, func(c *gompj.Comm) error {
		if c.Rank() == 0 {
			if _, ok, err := c.Iprobe(1, 0); err != nil || ok {
				return fmt.Errorf("Iprobe found a message nobody sent: %v", err)
			}
			if err := c.Send([]byte{1}, 1, 0); err != nil { // go
				return err
			}
			st, err := c.Probe(gompj.AnySource, 4)
			if err != nil || st.Source != 1 || st.Count() != 300 {
				return fmt.Errorf("Probe: %+v %v", st, err)
			}
			b := make([]float64, st.Count())
			_, err = c.Recv(b, st.Source, st.Tag)
			return err
		}
		if _, err := c.Recv(make([]byte, 1), 0, 0); err != nil {
			return err
		}
		return c.Send(make([]float64, 300), 0, 4)
	})
}

// Waitany and Testall over receives that complete one at a time, in an order rank 0 decides: ranks 1 and 2 send
// only when told to, so rank 0 knows which receives cannot have completed yet, and Testall must say false then.
func TestWaitanyAndTestall(t *testing.T) {
	run(t, 3, func(c *gompj.Comm) error {
		if c.Rank() != 0 {
			if _, err := c.Recv([]int{0}, 0, 9); err != nil { // the go-ahead
				return err
			}
			return c.Send([]int{c.Rank()}, 0, c.Rank())
		}
		if i, _, err := gompj.Waitany(nil, nil); i != -1 || err != nil {
			return fmt.Errorf("Waitany of nothing: %d %v", i, err)
		}
		a, b := make([]int, 1), make([]int, 1)
		ra, _ := c.Irecv(a, 1, 1)
		rb, _ := c.Irecv(b, 2, 2)
		if ok, err := gompj.Testall(ra, nil, rb); ok || err != nil {
			return fmt.Errorf("Testall before anything was sent: %v %v", ok, err)
		}
		reqs := []*gompj.Request{nil, ra, rb}
		for _, next := range []int{1, 2} {
			if err := c.Send([]int{0}, next, 9); err != nil {
				return err
			}
			i, st, err := gompj.Waitany(reqs...)
			if err != nil {
				return err
			}
			if i != next || st.Source != next {
				return fmt.Errorf("Waitany index %d status %+v; only receive %d could complete", i, st, next)
			}
			reqs[i] = nil
			ok, err := gompj.Testall(ra, nil, rb)
			if err != nil || ok != (next == 2) {
				return fmt.Errorf("Testall after receive %d completed: %v %v", next, ok, err)
			}
		}
		if a[0] != 1 || b[0] != 2 {
			return fmt.Errorf("received %d and %d", a[0], b[0])
		}
		return nil
	})
}

// Communicators isolate traffic: the same (source, tag) on another communicator never matches.
func TestCommunicatorIsolation(t *testing.T) {
	run(t, 4, func(c *gompj.Comm) error {
		d, err := c.Dup()
		if err != nil {
			return err
		}
		half, err := c.Split(c.Rank()%2, -c.Rank()) // keys reverse the order
		if err != nil {
			return err
		}
		if half.Size() != 2 || half.Rank() != 1-c.Rank()/2 {
			return fmt.Errorf("split: size %d rank %d", half.Size(), half.Rank())
		}
		if none, err := c.Split(gompj.Undefined, 0); none != nil || err != nil {
			return fmt.Errorf("Undefined color gave %v %v", none, err)
		}
		peer := c.Rank() ^ 1
		for i, cm := range []*gompj.Comm{c, d} {
			if err := cm.Send([]int{i}, peer, 0); err != nil {
				return err
			}
		}
		if err := half.Send([]int{7}, 1-half.Rank(), 0); err != nil {
			return err
		}
		got := make([]int, 1)
		// Receive in the opposite order from sending: each must still get its own communicator's message.
		if _, err := half.Recv(got, gompj.AnySource, gompj.AnyTag); err != nil || got[0] != 7 {
			return fmt.Errorf("half got %v %v", got, err)
		}
		if _, err := d.Recv(got, peer, 0); err != nil || got[0] != 1 {
			return fmt.Errorf("dup got %v %v", got, err)
		}
		if _, err := c.Recv(got, peer, 0); err != nil || got[0] != 0 {
			return fmt.Errorf("world got %v %v", got, err)
		}
		return errors.Join(d.Free(), half.Free())
	})
}

// Several goroutines of one rank may use a communicator at once (MPI_THREAD_MULTIPLE).
func TestConcurrentGoroutinesPerRank(t *testing.T) {
	const workers, msgs = 4, 200
	runShares(t, 2, func(c *gompj.Comm) error {
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for g := 0; g < workers; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; i < msgs; i++ {
					n := 2 + (i*7919)%19998
					if c.Rank() == 0 {
						b := make([]int64, n)
						b[0], b[n-1] = int64(i), int64(g)
						if err := c.Send(b, 1, g); err != nil {
							errs <- err
							return
						}
					} else {
						b := make([]int64, 20000)
						st, err := c.Recv(b, 0, g)
						if err != nil {
							errs <- err
							return
						}
						if b[0] != int64(i) || b[st.Count()-1] != int64(g) {
							errs <- fmt.Errorf("worker %d message %d out of order: %d", g, i, b[0])
							return
						}
					}
				}
			}(g)
		}
		wg.Wait()
		close(errs)
		return <-errs
	})
}

// A random mix of sends and receives across many ranks, checked message by message.
func TestRandomTraffic(t *testing.T) {
	const np = 6
	runShares(t, np, func(c *gompj.Comm) error {
		rng := rand.New(rand.NewSource(int64(c.Rank())))
		var reqs []*gompj.Request
		for i := 0; i < 50; i++ {
			for d := 0; d < np; d++ {
				n := rng.Intn(3000)
				if rng.Intn(20) == 0 {
					n = 100000
				}
				b := make([]int32, n+2)
				b[0], b[1] = int32(c.Rank()), int32(i)
				r, err := c.Isend(b, d, i%5)
				if err != nil {
					return err
				}
				reqs = append(reqs, r)
			}
		}
		// Non-overtaking holds among messages one receive could match: per (source, tag).
		next := make([][5]int32, np)
		for k := 0; k < 50*np; k++ {
			b := make([]int32, 100002)
			tag := k / np % 5
			st, err := c.Recv(b, gompj.AnySource, tag)
			if err != nil {
				return err
			}
			src := b[0]
			if int(src) != st.Source || st.Tag != tag || st.Count() < 2 {
				return fmt.Errorf("status %+v for a message from %d", st, src)
			}
			if b[1] < next[src][tag] {
				return fmt.Errorf("from %d tag %d: message %d after %d", src, tag, b[1], next[src][tag])
			}
			next[src][tag] = b[1] + 5
		}
		return gompj.Waitall(reqs...)
	})
}

func TestFailingRankAbortsTheJob(t *testing.T) {
	boom := errors.New("boom")
	err := gompj.RunWith(gompj.Config{Ranks: 4}, func(c *gompj.Comm) error {
		if c.Rank() == 2 {
			return boom
		}
		_, err := c.Recv(make([]byte, 1), gompj.AnySource, 0) // never sent: must not hang
		if !errors.Is(err, gompj.ErrAborted) {
			return fmt.Errorf("blocked Recv returned %v, want ErrAborted", err)
		}
		return err
	})
	var re *gompj.RankError
	if !errors.As(err, &re) || re.Rank != 2 || !errors.Is(err, boom) {
		t.Fatalf("Run returned %v, want rank 2's error", err)
	}
}

func TestPanickingRank(t *testing.T) {
	err := gompj.RunWith(gompj.Config{Ranks: 3}, func(c *gompj.Comm) error {
		if c.Rank() == 1 {
			panic("rank 1 fails on purpose")
		}
		_, err := c.Probe(gompj.AnySource, 99)
		return err
	})
	var re *gompj.RankError
	if !errors.As(err, &re) || re.Rank != 1 || re.Panic == nil || !strings.Contains(string(re.Stack), "p2p_test.go") {
		t.Fatalf("Run returned %v, want rank 1's panic with its stack", err)
	}
}

func TestAbortCode(t *testing.T) {
	err := gompj.RunWith(gompj.Config{Ranks: 3}, func(c *gompj.Comm) error {
		if c.Rank() == 0 {
			c.Abort(7)
			return errors.New("Abort returned")
		}
		r, err := c.Irecv(make([]byte, 1), 0, 0)
		if err != nil {
			return err
		}
		_, err = r.Wait()
		return err
	})
	var ae *gompj.AbortError
	if !errors.As(err, &ae) || ae.Code != 7 || ae.Rank != 0 {
		t.Fatalf("Run returned %v, want Abort(7) from rank 0", err)
	}
}

// Sending and receiving primitive slices allocates nothing, eager or rendezvous.
// Nonblocking calls allocate a fraction of an object each: requests come from per-rank chunks, and unexpected
// messages carry small payloads in place and larger ones in pooled buffers that go back to their pool whole.
func TestNonblockingAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, n := range []int{8, 1024} {
		run(t, 1, func(c *gompj.Comm) error {
			var sbuf, rbuf any = make([]byte, n), make([]byte, n) // boxed once, as a caller reusing buffers would
			pair := func(sendFirst bool) error {
				var s, r *gompj.Request
				var err error
				if sendFirst { // the message waits in the unexpected queue
					if s, err = c.Isend(sbuf, 0, 1); err == nil {
						r, err = c.Irecv(rbuf, 0, 1)
					}
				} else { // the send finds the posted receive
					if r, err = c.Irecv(rbuf, 0, 1); err == nil {
						s, err = c.Isend(sbuf, 0, 1)
					}
				}
				if err != nil {
					return err
				}
				return gompj.Waitall(s, r)
			}
			const pairs = 3000
			for _, sendFirst := range []bool{true, false} {
				for i := 0; i < 100; i++ { // warm the pools
					if err := pair(sendFirst); err != nil {
						return err
					}
				}
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				for i := 0; i < pairs; i++ {
					if err := pair(sendFirst); err != nil {
						return err
					}
				}
				runtime.ReadMemStats(&after)
				if per := float64(after.Mallocs-before.Mallocs) / pairs; per > 0.25 {
					return fmt.Errorf("%d bytes, send first %v: %.2f allocations per Isend+Irecv pair", n, sendFirst, per)
				}
			}
			return nil
		})
	}
}

func TestZeroAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, n := range []int{8, 1 << 20} {
		const runs = 200
		run(t, 2, func(c *gompj.Comm) error {
			buf := make([]byte, n)
			if c.Rank() == 1 {
				for i := 0; i < runs+1; i++ { // AllocsPerRun runs once more to warm up
					if _, err := c.Recv(buf, 0, 0); err != nil {
						return err
					}
					if err := c.Send(buf, 0, 0); err != nil {
						return err
					}
				}
				return nil
			}
			var err error
			allocs := testing.AllocsPerRun(runs, func() {
				if e := c.Send(buf, 1, 0); e != nil {
					err = e
				}
				if _, e := c.Recv(buf, 1, 0); e != nil {
					err = e
				}
			})
			if err != nil {
				return err
			}
			if allocs > 0 {
				return fmt.Errorf("%d-byte ping-pong: %v allocations per round trip", n, allocs)
			}
			return nil
		})
	}
}

// 64 ranks on however many cores pass a token round a ring.
func TestRingOf64(t *testing.T) {
	run(t, 64, func(c *gompj.Comm) error {
		tok := []int64{0}
		next, prev := (c.Rank()+1)%c.Size(), (c.Rank()+c.Size()-1)%c.Size()
		for lap := 0; lap < 10; lap++ {
			if c.Rank() == 0 {
				tok[0] = int64(lap)
				if err := c.Send(tok, next, 0); err != nil {
					return err
				}
				if _, err := c.Recv(tok, prev, 0); err != nil {
					return err
				}
				if tok[0] != int64(lap)+63 {
					return fmt.Errorf("lap %d: token %d", lap, tok[0])
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
}

package gompj_test

import (
	"errors"
	"fmt"
	"math/cmplx"
	"reflect"
	"strconv"
	"testing"

	"github.com/gompj/gompj"
	"github.com/gompj/gompj/internal/harness"
)

// The point-to-point suite in the three modes of internal/harness: one node of goroutine ranks, 3 node processes
// (ranks in blocks, so that every test mixes local and remote peers) and one rank per node process.

// bufType makes, fills and compares buffers of one element type.
type bufType struct {
	name string
	size int
	mk   func(n, seed int) any // a filled slice of n elements
	zero func(n int) any
}

func typ[T any](name string, size int, val func(i int) T) bufType {
	return bufType{name: name, size: size,
		mk: func(n, seed int) any {
			s := make([]T, n)
			for i := range s {
				s[i] = val(i + seed)
			}
			return s
		},
		zero: func(n int) any { return make([]T, n) }}
}

var bufTypes = []bufType{
	typ("byte", 1, func(i int) byte { return byte(i*7 + 1) }),
	typ("int8", 1, func(i int) int8 { return int8(i*5 - 3) }),
	typ("int16", 2, func(i int) int16 { return int16(i*3 - 77) }),
	typ("int32", 4, func(i int) int32 { return int32(i*1000003 - 5) }),
	typ("int64", 8, func(i int) int64 { return int64(i)*1e12 - 9 }),
	typ("uint16", 2, func(i int) uint16 { return uint16(i * 31) }),
	typ("uint32", 4, func(i int) uint32 { return uint32(i) * 2654435761 }),
	typ("uint64", 8, func(i int) uint64 { return uint64(i) * 11400714819323198485 }),
	typ("int", 8, func(i int) int { return -i * 3 }),
	typ("uint", 8, func(i int) uint { return uint(i) << 7 }),
	typ("float32", 4, func(i int) float32 { return float32(i) * 0.5 }),
	typ("float64", 8, func(i int) float64 { return float64(i) * 0.25 }),
	typ("complex64", 8, func(i int) complex64 { return complex(float32(i), -float32(i)) }),
	typ("complex128", 16, func(i int) complex128 { return cmplx.Rect(float64(i), 1) }),
	typ("bool", 1, func(i int) bool { return i%3 == 0 }),
}

// Sizes in bytes around the intra-node (64 KiB) and network (128 KiB) protocol switches.
var p2pSizes = []int{0, 1, 64<<10 - 1, 64 << 10, 64<<10 + 1, 128<<10 - 1, 128 << 10, 128<<10 + 1, 4 << 20}

func TestModesBufferTypes(t *testing.T) {
	harness.Run(t, 4, func(c *gompj.Comm) error {
		for ti, bt := range bufTypes {
			for si, size := range p2pSizes {
				if size == 4<<20 && (ti%4 != 0 || raceEnabled && ti != 0) {
					continue // 4 MiB for a few types only (one under the race detector): the wire path does not depend on the type
				}
				n := size / bt.size
				if size > 0 && n == 0 {
					n = 1
				}
				tag := ti*len(p2pSizes) + si
				if c.Rank() == 0 {
					for dst := 1; dst < c.Size(); dst++ {
						if err := c.Send(bt.mk(n, dst+tag), dst, tag); err != nil {
							return fmt.Errorf("send %s×%d to %d: %w", bt.name, n, dst, err)
						}
					}
					continue
				}
				got := bt.zero(n)
				st, err := c.Recv(got, 0, tag)
				if err != nil {
					return fmt.Errorf("recv %s×%d: %w", bt.name, n, err)
				}
				if st.Count() != n || st.Source != 0 || st.Tag != tag {
					return fmt.Errorf("%s×%d: status %+v count %d", bt.name, n, st, st.Count())
				}
				if want := bt.mk(n, c.Rank()+tag); !reflect.DeepEqual(got, want) {
					return fmt.Errorf("%s×%d: wrong data", bt.name, n)
				}
			}
		}
		return nil
	})
}

func TestModesSsend(t *testing.T) {
	harness.Run(t, 4, func(c *gompj.Comm) error {
		for _, n := range []int{0, 8, 1 << 20} {
			if c.Rank() == 0 {
				for dst := 1; dst < c.Size(); dst++ {
					req, err := c.Issend(make([]byte, n), dst, 5)
					if err != nil {
						return err
					}
					// dst posts its receive only after the go-ahead below: the Issend cannot have completed.
					if _, done, err := req.Test(); err != nil || done {
						return fmt.Errorf("Issend of %d bytes to %d completed before the receive was posted (%v)", n, dst, err)
					}
					if err := c.Send([]int{1}, dst, 6); err != nil {
						return err
					}
					if _, err := req.Wait(); err != nil {
						return err
					}
					if err := c.Ssend(make([]byte, n), dst, 7); err != nil {
						return err
					}
				}
				continue
			}
			if _, err := c.Recv([]int{0}, 0, 6); err != nil {
				return err
			}
			if _, err := c.Recv(make([]byte, n), 0, 5); err != nil {
				return err
			}
			if _, err := c.Recv(make([]byte, n), 0, 7); err != nil {
				return err
			}
		}
		return nil
	})
}

func TestModesNonblocking(t *testing.T) {
	harness.Run(t, 5, func(c *gompj.Comm) error {
		me, np := c.Rank(), c.Size()
		for _, n := range []int{16, 300 << 10} { // eager and rendezvous on both devices
			send := make([][]int32, np)
			recv := make([][]int32, np)
			var sreqs, rreqs []*gompj.Request
			for p := range np {
				if p == me {
					sreqs, rreqs = append(sreqs, nil), append(rreqs, nil) // nil requests are skipped
					continue
				}
				send[p] = make([]int32, n/4)
				for i := range send[p] {
					send[p][i] = int32(me*1000 + p + i)
				}
				recv[p] = make([]int32, n/4)
				r, err := c.Irecv(recv[p], p, 3)
				if err != nil {
					return err
				}
				rreqs = append(rreqs, r)
				s, err := c.Isend(send[p], p, 3)
				if err != nil {
					return err
				}
				sreqs = append(sreqs, s)
			}
			// A receive that cannot complete before this rank says so: the previous rank sends it only after this
			// rank's go-ahead. Until then Testall over it (and the sends, and nils) must say false.
			prev, next := (me+np-1)%np, (me+1)%np
			late := []int32{-1}
			lr, err := c.Irecv(late, prev, 4)
			if err != nil {
				return err
			}
			if ok, err := gompj.Testall(append(sreqs, nil, lr)...); ok || err != nil {
				return fmt.Errorf("Testall with a receive whose message is not sent yet: %v %v", ok, err)
			}
			if err := c.Send([]int{1}, prev, 5); err != nil {
				return err
			}
			if _, err := c.Recv([]int{0}, next, 5); err != nil {
				return err
			}
			if err := c.Send([]int32{int32(me)}, next, 4); err != nil {
				return err
			}
			sreqs = append(sreqs, lr)
			// Receives with Waitany, sends (and the late receive) with Testall, the whole again with Waitall.
			for left := np - 1; left > 0; left-- {
				i, st, err := gompj.Waitany(rreqs...)
				if err != nil {
					return err
				}
				if i < 0 || st.Source != i || recv[i][len(recv[i])-1] != int32(i*1000+me+len(recv[i])-1) {
					return fmt.Errorf("Waitany: index %d status %+v", i, st)
				}
				rreqs[i] = nil
			}
			if i, _, _ := gompj.Waitany(rreqs...); i != -1 {
				return fmt.Errorf("Waitany over completed requests: %d", i)
			}
			for {
				ok, err := gompj.Testall(sreqs...)
				if err != nil {
					return err
				}
				if ok {
					break
				}
			}
			if err := gompj.Waitall(sreqs...); err != nil {
				return err
			}
			if late[0] != int32(prev) {
				return fmt.Errorf("the late receive got %d, want %d", late[0], prev)
			}
		}
		return nil
	})
}

// Wildcard receives at rank 0 from 8 senders; in pure mode (which runs even at this size) all 8 are processes of
// their own.
func TestModesWildcards(t *testing.T) {
	harness.RunLarge(t, 9, func(c *gompj.Comm) error {
		me, np := c.Rank(), c.Size()
		if me != 0 {
			if err := c.Send([]int{me}, 0, 100+me); err != nil {
				return err
			}
			return c.Send([]int{me}, 0, 7)
		}
		seen := map[int]bool{}
		for range np - 1 { // AnySource and AnyTag: local and remote senders alike
			b := []int{-1}
			st, err := c.Recv(b, gompj.AnySource, gompj.AnyTag)
			if err != nil {
				return err
			}
			if st.Source != b[0] || st.Tag != 100+b[0] && st.Tag != 7 {
				return fmt.Errorf("status %+v for a message from %d", st, b[0])
			}
			seen[st.Source*1000+st.Tag] = true
		}
		for range np - 1 {
			b := []int{-1}
			st, err := c.Recv(b, gompj.AnySource, gompj.AnyTag)
			if err != nil {
				return err
			}
			if seen[st.Source*1000+st.Tag] {
				return fmt.Errorf("message %+v twice", st)
			}
			seen[st.Source*1000+st.Tag] = true
		}
		if len(seen) != 2*(np-1) {
			return fmt.Errorf("got %d distinct messages, want %d", len(seen), 2*(np-1))
		}
		return nil
	})
}

// Non-overtaking across eager and rendezvous messages of one stream, with a bound on unexpected messages so small
// (tinyShare) that local eager sends turn rendezvous too, mid-stream.
func TestModesNonOvertaking(t *testing.T) {
	t.Setenv("GOMPJ_UNEXPECTED_SHARE", strconv.Itoa(tinyShare))
	harness.Run(t, 4, func(c *gompj.Comm) error {
		const k = 120
		me, np := c.Rank(), c.Size()
		if me != 0 {
			for i := range k {
				n := 2
				if i%17 == 0 {
					n = 40 << 10 // 320 KiB: rendezvous between eager messages, same tag
				}
				b := make([]int64, n)
				b[0], b[1] = int64(me), int64(i)
				if err := c.Send(b, 0, 9); err != nil {
					return err
				}
			}
			return nil
		}
		next := make([]int64, np)
		buf := make([]int64, 40<<10)
		for range k * (np - 1) {
			st, err := c.Recv(buf, gompj.AnySource, 9)
			if err != nil {
				return err
			}
			src := int(buf[0])
			if st.Source != src || buf[1] != next[src] {
				return fmt.Errorf("from %d: message %d arrived when %d was due", src, buf[1], next[src])
			}
			next[src]++
		}
		return nil
	})
}

func TestModesProbe(t *testing.T) {
	harness.Run(t, 4, func(c *gompj.Comm) error {
		me, np := c.Rank(), c.Size()
		if me != 0 {
			n := me * 50000 // rank 1 eager locally; ranks 2, 3 beyond the network limit
			b := make([]float64, n)
			for i := range b {
				b[i] = float64(me)
			}
			return c.Send(b, 0, me)
		}
		for range np - 1 {
			st, err := c.Probe(gompj.AnySource, gompj.AnyTag)
			if err != nil {
				return err
			}
			if st.Count() != st.Source*50000 || st.Tag != st.Source {
				return fmt.Errorf("Probe: status %+v count %d", st, st.Count())
			}
			// Iprobe for the same message must now succeed at once (it is queued).
			st2, ok, err := c.Iprobe(st.Source, st.Tag)
			if err != nil || !ok || st2.Count() != st.Count() {
				return fmt.Errorf("Iprobe after Probe: %+v %v %v", st2, ok, err)
			}
			b := make([]float64, st.Count())
			if _, err := c.Recv(b, st.Source, st.Tag); err != nil {
				return err
			}
			if len(b) > 0 && b[len(b)-1] != float64(st.Source) {
				return errors.New("wrong payload after Probe")
			}
		}
		if _, ok, err := c.Iprobe(gompj.AnySource, gompj.AnyTag); ok || err != nil {
			return fmt.Errorf("Iprobe found a message that is not there (%v)", err)
		}
		return nil
	})
}

func TestModesSendrecvRing(t *testing.T) {
	harness.Run(t, 9, func(c *gompj.Comm) error {
		me, np := c.Rank(), c.Size()
		for _, n := range []int{1, 200 << 10} {
			out := make([]int32, n)
			in := make([]int32, n)
			out[0], out[n-1] = int32(me), int32(me)
			for step := 1; step < np; step++ {
				st, err := c.Sendrecv(out, (me+1)%np, step, in, (me+np-1)%np, step)
				if err != nil {
					return err
				}
				want := int32((me - step + np) % np)
				if in[0] != want || in[n-1] != want || st.Source != (me+np-1)%np {
					return fmt.Errorf("ring step %d: got %d, want %d", step, in[0], want)
				}
				out, in = in, out
			}
		}
		return nil
	})
}

type modesParticle struct {
	ID   int
	Name string
	Pos  []float64
	Tags map[string]int
}

func TestModesObjects(t *testing.T) {
	harness.Run(t, 4, func(c *gompj.Comm) error {
		me, np := c.Rank(), c.Size()
		big := make([]float64, 40000) // an encoded object beyond the network's eager limit
		for i := range big {
			big[i] = float64(i)
		}
		if me == 0 {
			for dst := 1; dst < np; dst++ {
				p := &modesParticle{ID: dst, Name: fmt.Sprint("p", dst), Pos: []float64{1, 2, float64(dst)}, Tags: map[string]int{"x": dst}}
				if err := c.Send(p, dst, 1); err != nil {
					return err
				}
				if err := c.Send(map[string][]int{"k": {dst, dst}}, dst, 2); err != nil {
					return err
				}
				if err := c.Send(&modesParticle{ID: -1, Pos: big}, dst, 3); err != nil {
					return err
				}
			}
			return nil
		}
		var p modesParticle
		if _, err := c.Recv(&p, 0, 1); err != nil {
			return err
		}
		if p.ID != me || p.Name != fmt.Sprint("p", me) || p.Tags["x"] != me || p.Pos[2] != float64(me) {
			return fmt.Errorf("struct: %+v", p)
		}
		var m map[string][]int
		if _, err := c.Recv(&m, 0, 2); err != nil {
			return err
		}
		if len(m["k"]) != 2 || m["k"][1] != me {
			return fmt.Errorf("map: %v", m)
		}
		var q modesParticle
		if _, err := c.Recv(&q, 0, 3); err != nil {
			return err
		}
		if !reflect.DeepEqual(q.Pos, big) {
			return errors.New("large object: wrong data")
		}
		return nil
	})
}

func TestModesDupSplit(t *testing.T) {
	harness.Run(t, 6, func(c *gompj.Comm) error {
		me, np := c.Rank(), c.Size()
		d, err := c.Dup()
		if err != nil {
			return err
		}
		// The same (source, tag) on two communicators: each receive gets its own communicator's message.
		peer := np - 1 - me
		if me < np/2 {
			if err := d.Send([]int{2}, peer, 0); err != nil {
				return err
			}
			if err := c.Send([]int{1}, peer, 0); err != nil {
				return err
			}
		} else {
			b := []int{0}
			if _, err := c.Recv(b, peer, 0); err != nil || b[0] != 1 {
				return fmt.Errorf("world got %d (%v)", b[0], err)
			}
			if _, err := d.Recv(b, gompj.AnySource, gompj.AnyTag); err != nil || b[0] != 2 {
				return fmt.Errorf("dup got %d (%v)", b[0], err)
			}
		}
		s, err := c.Split(me%2, -me) // reversed order inside each half
		if err != nil {
			return err
		}
		if s.Size() != np/2 || s.Rank() != (np/2-1)-me/2 {
			return fmt.Errorf("split: rank %d of %d", s.Rank(), s.Size())
		}
		sum := []int{me}
		in := []int{0}
		for step := 1; step < s.Size(); step++ {
			if _, err := s.Sendrecv([]int{me}, (s.Rank()+step)%s.Size(), 4, in, (s.Rank()-step+s.Size())%s.Size(), 4); err != nil {
				return err
			}
			if in[0]%2 != me%2 {
				return fmt.Errorf("split comm %d received from world rank %d", me%2, in[0])
			}
			sum[0] += in[0]
		}
		if none, err := c.Split(gompj.Undefined, 0); none != nil || err != nil {
			return fmt.Errorf("Split(Undefined) = %v, %v", none, err)
		}
		return errors.Join(s.Free(), d.Free())
	})
}

func TestModesErrorsGoOn(t *testing.T) {
	harness.Run(t, 4, func(c *gompj.Comm) error {
		me, np := c.Rank(), c.Size()
		for _, n := range []int{10, 50000} { // eager and rendezvous on both devices
			// Patterned, non-zero data: a truncated receive must deliver the part that fits.
			sent := make([]int64, n)
			for i := range sent {
				sent[i] = int64(i)*1_000_003 + int64(me) + 1
			}
			if me == 0 {
				for dst := 1; dst < np; dst++ {
					if err := c.Send(sent, dst, 1); err != nil {
						return err
					}
					if err := c.Send(make([]float64, n), dst, 2); err != nil {
						return err
					}
					if err := c.Send([]int64{42}, dst, 3); err != nil {
						return err
					}
				}
				continue
			}
			short := make([]int64, n/2)
			st, err := c.Recv(short, 0, 1)
			if !errors.Is(err, gompj.ErrTruncate) || st.Count() != n/2 {
				return fmt.Errorf("short receive of %d: %v, count %d, want ErrTruncate and %d", n, err, st.Count(), n/2)
			}
			for i := range short {
				if want := int64(i)*1_000_003 + 1; short[i] != want { // sent by rank 0
					return fmt.Errorf("short receive of %d: element %d is %d, want %d", n, i, short[i], want)
				}
			}
			if _, err := c.Recv(make([]int32, 2*n), 0, 2); !errors.Is(err, gompj.ErrType) {
				return fmt.Errorf("receive of float64 into int32: %v, want ErrType", err)
			}
			b := []int64{0}
			if _, err := c.Recv(b, 0, 3); err != nil || b[0] != 42 {
				return fmt.Errorf("after the errors: %v %v", b, err)
			}
		}
		return nil
	})
}

func TestModesSendToSelf(t *testing.T) {
	harness.Run(t, 3, func(c *gompj.Comm) error {
		me := c.Rank()
		if err := c.Send([]int{me}, me, 1); err != nil {
			return err
		}
		b := []int{-1}
		if st, err := c.Recv(b, me, 1); err != nil || b[0] != me || st.Source != me {
			return fmt.Errorf("self: %v %v", b, err)
		}
		big := make([]byte, 1<<20)
		big[len(big)-1] = byte(me + 1)
		req, err := c.Isend(big, me, 2)
		if err != nil {
			return err
		}
		in := make([]byte, 1<<20)
		if _, err := c.Recv(in, gompj.AnySource, 2); err != nil || in[len(in)-1] != byte(me+1) {
			return fmt.Errorf("self rendezvous: %v", err)
		}
		_, err = req.Wait()
		return err
	})
}

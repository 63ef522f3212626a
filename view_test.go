package gompj_test

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	. "github.com/gompj/gompj"
	"github.com/gompj/gompj/internal/harness"
)

// Views in point-to-point, in the three modes: every element type, shapes with odd strides and sizes above every
// protocol switch, slice to view, view to slice and view to view, blocking and not. The reference is the list of
// slice indices a view selects, computed here from MPI's definitions.

// viewShape makes a view over a slice of n elements (or says how long the slice must be) and its index list.
type viewShape struct {
	name string
	// need returns the slice length for a view of about k elements.
	need func(k int) int
	make func(buf any, k int) (*View, []int, error)
}

var viewShapes = []viewShape{
	{"vector3x7", func(k int) int { return (k/3)*7 + 3 }, func(buf any, k int) (*View, []int, error) {
		count := k / 3
		v, err := Vector(buf, count, 3, 7)
		var idx []int
		for b := range count {
			for i := range 3 {
				idx = append(idx, b*7+i)
			}
		}
		return v, idx, err
	}},
	{"column", func(k int) int { return (k-1)*5 + 1 }, func(buf any, k int) (*View, []int, error) {
		v, err := Vector(buf, k, 1, 5)
		var idx []int
		for b := range k {
			idx = append(idx, b*5)
		}
		return v, idx, err
	}},
	{"indexed", func(k int) int { return 2*k + 8 }, func(buf any, k int) (*View, []int, error) {
		// blocks of 1..4 elements, every other one taken, in reverse order
		var lens, displs, idx []int
		at, total := 0, 0
		for total < k {
			l := min(1+len(lens)%4, k-total)
			lens, displs = append(lens, l), append(displs, at)
			at += 2 * l
			total += l
		}
		for i, j := 0, len(lens)-1; i < j; i, j = i+1, j-1 {
			lens[i], lens[j] = lens[j], lens[i]
			displs[i], displs[j] = displs[j], displs[i]
		}
		for b := range lens {
			for i := range lens[b] {
				idx = append(idx, displs[b]+i)
			}
		}
		v, err := Indexed(buf, lens, displs)
		return v, idx, err
	}},
	{"subarray", func(k int) int { z := k/12 + 1; return 5 * 4 * (z + 2) }, func(buf any, k int) (*View, []int, error) {
		// a 4x3xz box of a 5x4x(z+2) array, at (1, 1, 1)
		z := k/12 + 1
		sizes, sub, starts := []int{5, 4, z + 2}, []int{4, 3, z}, []int{1, 1, 1}
		var idx []int
		for a := range sub[0] {
			for b := range sub[1] {
				for c := range sub[2] {
					idx = append(idx, ((starts[0]+a)*sizes[1]+starts[1]+b)*sizes[2]+starts[2]+c)
				}
			}
		}
		v, err := Subarray(buf, sizes, sub, starts)
		return v, idx, err
	}},
}

func elemAt(s any, i int) any { return reflect.ValueOf(s).Index(i).Interface() }

// viewCounts are element counts: small, around the 64 KiB intra-node switch, above the 128 KiB network one.
func viewCounts(size int) []int { return []int{5, (64<<10)/size + 1, (128<<10)/size + 7} }

func TestModesViewP2P(t *testing.T) {
	harness.Run(t, 3, func(c *Comm) error {
		tag := 0
		for ti, bt := range bufTypes {
			if (testing.Short() || raceEnabled) && ti%7 != 0 {
				continue // the element type matters to the typed copy loops only: a few of them under -short
			}
			for si, sh := range viewShapes {
				for ki, k := range viewCounts(bt.size) {
					if ki == 1 && (ti+si)%3 != 0 {
						continue // the middle size for some combinations only
					}
					for dir := range 3 { // 0 view to slice, 1 slice to view, 2 view to view
						tag++
						if err := viewCase(c, bt, sh, k, dir, tag); err != nil {
							return fmt.Errorf("%s %s k=%d dir %d: %w", bt.name, sh.name, k, dir, err)
						}
					}
				}
			}
		}
		return nil
	})
}

// viewCase: rank 0 sends to every other rank (local and remote in the nodes mode), half the time nonblocking.
func viewCase(c *Comm, bt bufType, sh viewShape, k, dir, tag int) error {
	n := sh.need(k)
	if c.Rank() == 0 {
		for dst := 1; dst < c.Size(); dst++ {
			buf := bt.mk(n, dst+tag)
			var send any = buf
			if dir != 1 {
				v, _, err := sh.make(buf, k)
				if err != nil {
					return err
				}
				send = v
			} else {
				v, _, _ := sh.make(bt.zero(n), k)
				send = reflect.ValueOf(buf).Slice(0, v.Len()).Interface() // the same number of elements
			}
			if tag%2 == 0 {
				if err := c.Send(send, dst, tag); err != nil {
					return err
				}
			} else {
				r, err := c.Isend(send, dst, tag)
				if err != nil {
					return err
				}
				if _, err := r.Wait(); err != nil {
					return err
				}
			}
		}
		return nil
	}
	sent := bt.mk(n, c.Rank()+tag)
	sv, sidx, err := sh.make(bt.zero(n), k)
	if err != nil {
		return err
	}
	// the message, element by element (as bytes: every type's elements are compared as memory)
	sz := bt.size
	sb := asBytes(sent)
	msg := make([]byte, 0, sv.Len()*sz)
	for i := range sv.Len() {
		j := i
		if dir != 1 {
			j = sidx[i]
		}
		msg = append(msg, sb[j*sz:(j+1)*sz]...)
	}
	got := bt.zero(n)
	var recv any = got
	var ridx []int
	if dir != 0 {
		v, idx, err := sh.make(got, k)
		if err != nil {
			return err
		}
		recv, ridx = v, idx
	}
	var st Status
	if tag%3 == 0 {
		r, err := c.Irecv(recv, 0, tag)
		if err != nil {
			return err
		}
		if st, err = r.Wait(); err != nil {
			return err
		}
	} else if st, err = c.Recv(recv, 0, tag); err != nil {
		return err
	}
	if st.Count() != sv.Len() {
		return fmt.Errorf("Count %d, want %d", st.Count(), sv.Len())
	}
	want := make([]byte, n*sz)
	for i := range sv.Len() {
		at := i
		if ridx != nil {
			at = ridx[i]
		}
		copy(want[at*sz:(at+1)*sz], msg[i*sz:(i+1)*sz])
	}
	if gb := asBytes(got); !bytes.Equal(gb, want) {
		for i := range n {
			if !bytes.Equal(gb[i*sz:(i+1)*sz], want[i*sz:(i+1)*sz]) {
				return fmt.Errorf("element %d of the receive slice is %v, want the bytes %v", i, elemAt(got, i), want[i*sz:(i+1)*sz])
			}
		}
	}
	return nil
}

// asBytes is a primitive slice's memory.
func asBytes(s any) []byte {
	v := reflect.ValueOf(s)
	if v.Len() == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(v.UnsafePointer()), v.Len()*int(v.Type().Elem().Size()))
}

// TestModesViewErrors: type signatures, truncation (what fits is delivered), overlap, nil views; the job goes on.
func TestModesViewErrors(t *testing.T) {
	harness.Run(t, 3, func(c *Comm) error {
		for _, k := range []int{6, (128<<10)/8 + 9} { // eager and rendezvous everywhere
			if err := viewErrors(c, k); err != nil {
				return fmt.Errorf("k=%d: %w", k, err)
			}
		}
		return nil
	})
}

func viewErrors(c *Comm, k int) error {
	a := make([]float64, 2*k)
	for i := range a {
		a[i] = float64(i) + 0.5
	}
	every2, _ := Vector(a, k, 1, 2) // a[0], a[2], ...
	if c.Rank() == 0 {
		for dst := 1; dst < c.Size(); dst++ {
			for tag := range 4 {
				if err := c.Send(every2, dst, tag); err != nil {
					return err
				}
			}
		}
		// sending a nil view, or a zero one
		var nv *View
		if err := c.Send(nv, 1, 9); !errors.Is(err, ErrBuffer) {
			return fmt.Errorf("sending a nil *View: %v", err)
		}
		if err := c.Send(&View{}, 1, 9); !errors.Is(err, ErrBuffer) {
			return fmt.Errorf("sending a zero View: %v", err)
		}
		if _, err := c.Irecv(&View{}, 1, 9); !errors.Is(err, ErrBuffer) {
			return fmt.Errorf("receiving into a zero View: %v", err)
		}
		return c.Barrier()
	}
	// 0: into another element type
	if _, err := c.Recv(make([]int64, k), 0, 0); !errors.Is(err, ErrType) {
		return fmt.Errorf("a float64 view into []int64: %v", err)
	}
	// 1: into a slice one short: ErrTruncate, the prefix delivered
	short := make([]float64, k-1)
	st, err := c.Recv(short, 0, 1)
	if !errors.Is(err, ErrTruncate) || st.Count() != k-1 {
		return fmt.Errorf("into a slice one short: %v, Count %d", err, st.Count())
	}
	for i, x := range short {
		if x != a[2*i] {
			return fmt.Errorf("truncated into a slice: element %d is %v, want %v", i, x, a[2*i])
		}
	}
	// 2: into a view one short, over a larger slice whose other elements must stay untouched
	b := make([]float64, 3*k)
	sv, _ := Vector(b[1:], k-1, 1, 3)
	if _, err := c.Recv(sv, 0, 2); !errors.Is(err, ErrTruncate) {
		return fmt.Errorf("into a view one short: %v", err)
	}
	for i, x := range b {
		want := 0.0
		if i%3 == 1 && i/3 < k-1 {
			want = a[2*(i/3)]
		}
		if x != want {
			return fmt.Errorf("truncated into a view: b[%d] = %v, want %v", i, x, want)
		}
	}
	// receiving into an overlapping view is refused, before anything is matched
	ov, _ := Vector(make([]float64, k+1), k, 2, 1)
	if _, err := c.Recv(ov, 0, 3); !errors.Is(err, ErrBuffer) {
		return fmt.Errorf("receiving into an overlapping view: %v", err)
	}
	if _, err := c.Irecv(ov, 0, 3); !errors.Is(err, ErrBuffer) {
		return fmt.Errorf("Irecv into an overlapping view: %v", err)
	}
	// 3: Probe sees k elements, and the message is still there for a good receive
	st, err = c.Probe(0, 3)
	if err != nil || st.Count() != k {
		return fmt.Errorf("Probe of a view message: Count %d, %v", st.Count(), err)
	}
	full := make([]float64, k)
	if _, err := c.Recv(full, 0, 3); err != nil || full[k-1] != a[2*(k-1)] {
		return fmt.Errorf("after the refusals: %v, last element %v", err, full[k-1])
	}
	return c.Barrier()
}

// TestModesViewSendrecv: Sendrecv between views, a ring of column exchanges.
func TestModesViewSendrecv(t *testing.T) {
	harness.Run(t, 4, func(c *Comm) error {
		const rows, cols = 300, 7
		m := make([]int32, rows*cols)
		for i := range m {
			m[i] = int32(c.Rank()*100000 + i)
		}
		first, _ := Vector(m, rows, 1, cols)         // column 0
		last, _ := Vector(m[cols-1:], rows, 1, cols) // column cols-1
		right, left := (c.Rank()+1)%c.Size(), (c.Rank()+c.Size()-1)%c.Size()
		if _, err := c.Sendrecv(last, right, 1, first, left, 1); err != nil {
			return err
		}
		for r := range rows {
			if want := int32(left*100000 + r*cols + cols - 1); m[r*cols] != want {
				return fmt.Errorf("row %d: column 0 holds %d, want %d", r, m[r*cols], want)
			}
		}
		return nil
	})
}

// TestModesViewPersistent: persistent sends and receives of Views (a column of a matrix each way around a ring),
// started again with new data, in eager and rendezvous sizes.
func TestModesViewPersistent(t *testing.T) {
	harness.Run(t, 3, func(c *Comm) error {
		for _, rows := range []int{10, 20000} {
			const cols = 3
			a := make([]float64, rows*cols)
			b := make([]float64, rows*cols)
			out, _ := Vector(a[2:], rows, 1, cols) // column 2 of a
			in, _ := Vector(b[1:], rows, 1, cols)  // into column 1 of b
			right, left := (c.Rank()+1)%c.Size(), (c.Rank()+c.Size()-1)%c.Size()
			s, err := c.SendInit(out, right, 4)
			if err != nil {
				return err
			}
			r, err := c.RecvInit(in, left, 4)
			if err != nil {
				return err
			}
			for run := range 3 {
				for i := range a {
					a[i] = float64(c.Rank()*1000000 + run*100000 + i)
				}
				clear(b)
				if err := Startall(r, s); err != nil {
					return err
				}
				if err := Waitall(r, s); err != nil {
					return err
				}
				for i := range rows {
					want := float64(left*1000000 + run*100000 + i*cols + 2)
					if b[i*cols+1] != want || b[i*cols] != 0 || b[i*cols+2] != 0 {
						return fmt.Errorf("rows %d run %d row %d: %v, want %v in column 1 only", rows, run, i, b[i*cols:i*cols+3], want)
					}
				}
			}
			s.Free()
			r.Free()
		}
		return nil
	})
}

// TestModesViewManyBlocks: a ping-pong of Views of more blocks than one scatter-gather call takes (IOV_MAX), blocks
// large enough to go out and be read in as they are (not staged), and nothing else in flight, so that a receiver
// that stops reading a connection too early waits forever (it did: a readv capped at 1024 pieces looked like a
// drained socket).
func TestModesViewManyBlocks(t *testing.T) {
	harness.Run(t, 2, func(c *Comm) error {
		for _, bl := range []int{64, 160} { // 512 and 1280 bytes a block
			const blocks, stride = 2100, 200
			src, dst := make([]float64, blocks*stride), make([]float64, blocks*stride)
			for i := range src {
				src[i] = float64(i + 1000*c.Rank())
			}
			sv, _ := Vector(src, blocks, bl, stride)
			dv, _ := Vector(dst, blocks, bl, stride)
			peer := 1 - c.Rank()
			for round := range 3 {
				if c.Rank() == round%2 {
					if err := c.Send(sv, peer, round); err != nil {
						return err
					}
					continue
				}
				clear(dst)
				if _, err := c.Recv(dv, peer, round); err != nil {
					return err
				}
				for b := 0; b < blocks; b++ {
					for i := 0; i < bl; i++ {
						if k := b*stride + i; dst[k] != float64(k+1000*peer) {
							return fmt.Errorf("blocks of %d, round %d: element %d is %v", bl, round, k, dst[k])
						}
					}
				}
			}
		}
		return nil
	})
}

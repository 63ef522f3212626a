package gompj_test

import (
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/gompj/gompj"
	"github.com/gompj/gompj/internal/harness"
)

// Truncation: a message longer than its receive buffer fails the receive with ErrTruncate, delivers the part that
// fits, says so in Status.Count(), and is consumed (the next message on the same tag is the next one sent). Every
// delivery path is taken, in each of the harness's modes (on one node every peer is local, with one rank per node
// process every peer is remote, with 3 node processes rank 0 has a local and two remote peers):
//
//   - sizes: in place (≤ 64 B), a pooled eager copy, above the intra-node switch (64 KiB) but under the network's
//     (128 KiB), above both;
//   - the receive posted before the message arrives, or the message queued before the receive;
//   - Recv and Irecv;
//   - objects: a top-level array received into a shorter one, eager on both devices and, above the network
//     switch, rendezvous across nodes.
//
// The data is patterned and non-zero, and the elements just past the receive window must stay untouched.

// truncPattern is element i of the message sent to rank dst in case k: never zero, and different per case.
func truncPattern(k, dst, i int) int32 { return int32(k*1_000_003+dst*7919+i*2654435761%1_000_000) | 1 }

type truncPoint struct {
	I int64
	S string
}

func truncObject(k, dst, n int) []truncPoint {
	s := make([]truncPoint, n)
	for i := range s {
		s[i] = truncPoint{int64(truncPattern(k, dst, i)), fmt.Sprint("p", i)}
	}
	return s
}

const (
	truncGo   = 1 // control: "post now" / "send now"
	truncMsg  = 2 // the message to truncate
	truncNext = 3 // the message after it
	guard     = 8 // elements past the receive window that must not change
)

type truncCase struct {
	name   string
	n      int  // elements sent
	object bool // a []truncPoint sent as an object, received into a shorter array
	posted bool // the receive is posted before the message is sent
	irecv  bool
}

func truncCases() []truncCase {
	var cs []truncCase
	for _, sz := range []struct {
		name string
		n    int
	}{{"in place", 10}, {"pooled eager", 1000}, {"local rendezvous, network eager", 25 << 10}, {"rendezvous", 150 << 10}} {
		for _, posted := range []bool{false, true} {
			for _, irecv := range []bool{false, true} {
				cs = append(cs, truncCase{name: sz.name, n: sz.n, posted: posted, irecv: irecv})
			}
		}
	}
	for _, n := range []int{12, 12000} { // about 200 B and 200 KiB encoded: eager, and rendezvous across nodes
		for _, posted := range []bool{false, true} {
			cs = append(cs, truncCase{name: "object", n: n, object: true, posted: posted, irecv: posted})
		}
	}
	return cs
}

func (tc truncCase) String() string {
	order := "queued first"
	if tc.posted {
		order = "posted first"
	}
	call := "Recv"
	if tc.irecv {
		call = "Irecv"
	}
	return fmt.Sprintf("%s (%d elements), %s, %s", tc.name, tc.n, order, call)
}

func TestModesTruncation(t *testing.T) {
	harness.Run(t, 4, func(c *gompj.Comm) error {
		me := c.Rank()
		for k, tc := range truncCases() {
			if me == 0 {
				for dst := 1; dst < c.Size(); dst++ {
					if err := truncSend(c, tc, k, dst); err != nil {
						return fmt.Errorf("to rank %d, %v: %w", dst, tc, err)
					}
				}
			} else if err := truncRecv(c, tc, k); err != nil {
				return fmt.Errorf("rank %d from rank 0, %v: %w", me, tc, err)
			}
		}
		return nil
	})
}

func truncSend(c *gompj.Comm, tc truncCase, k, dst int) error {
	var msg any
	if tc.object {
		msg = truncObject(k, dst, tc.n)
	} else {
		s := make([]int32, tc.n)
		for i := range s {
			s[i] = truncPattern(k, dst, i)
		}
		msg = s
	}
	if tc.posted { // wait until dst has posted its receive
		if _, err := c.Recv([]int{0}, dst, truncGo); err != nil {
			return err
		}
	}
	// Isend: a rendezvous message is not matched before dst has heard "go" below.
	req, err := c.Isend(msg, dst, truncMsg)
	if err != nil {
		return err
	}
	if !tc.posted { // dst receives once the message is queued there (messages between two ranks keep their order)
		if err := c.Send([]int{0}, dst, truncGo); err != nil {
			return err
		}
	}
	if _, err := req.Wait(); err != nil {
		return fmt.Errorf("the sender's request: %w", err)
	}
	return c.Send([]int32{int32(k) + 42}, dst, truncNext)
}

func truncRecv(c *gompj.Comm, tc truncCase, k int) error {
	me, fits := c.Rank(), tc.n/2
	var buf, target any
	var check func() error
	if tc.object {
		// A top-level array of fits elements, the message has tc.n: the first fits are delivered.
		buf = makeTruncArray(fits)
		target = buf
		want := truncObject(k, me, fits)
		check = func() error {
			got := truncArrayElems(buf)
			for i := range want {
				if got[i] != want[i] {
					return fmt.Errorf("element %d: got %v, want %v", i, got[i], want[i])
				}
			}
			return nil
		}
	} else {
		const sentinel = -8 // even: never a pattern value
		all := make([]int32, fits+guard)
		for i := range all {
			all[i] = sentinel
		}
		target = all[:fits]
		check = func() error {
			for i := range fits {
				if w := truncPattern(k, me, i); all[i] != w {
					return fmt.Errorf("element %d of the %d that fit: got %d, want %d", i, fits, all[i], w)
				}
			}
			for i := fits; i < len(all); i++ {
				if all[i] != sentinel {
					return fmt.Errorf("element %d past the receive buffer was overwritten with %d", i, all[i])
				}
			}
			return nil
		}
	}
	var st gompj.Status
	var err error
	switch {
	case tc.posted:
		req, e := c.Irecv(target, 0, truncMsg)
		if e != nil {
			return e
		}
		if err := c.Send([]int{0}, 0, truncGo); err != nil {
			return err
		}
		st, err = req.Wait()
	default:
		if _, err := c.Recv([]int{0}, 0, truncGo); err != nil {
			return err
		}
		if tc.irecv {
			req, e := c.Irecv(target, 0, truncMsg)
			if e != nil {
				return e
			}
			st, err = req.Wait()
		} else {
			st, err = c.Recv(target, 0, truncMsg)
		}
	}
	if !errors.Is(err, gompj.ErrTruncate) {
		return fmt.Errorf("got error %v, want ErrTruncate", err)
	}
	wantCount := fits
	if tc.object {
		wantCount = 1 // an object message counts as one element
	}
	if st.Count() != wantCount || st.Source != 0 || st.Tag != truncMsg {
		return fmt.Errorf("status: source %d tag %d count %d, want source 0 tag %d count %d", st.Source, st.Tag,
			st.Count(), truncMsg, wantCount)
	}
	if err := check(); err != nil {
		return err
	}
	next := []int32{0}
	if _, err := c.Recv(next, 0, truncNext); err != nil || next[0] != int32(k)+42 {
		return fmt.Errorf("the message after the truncated one: %v, %v (was the truncated one consumed?)", next, err)
	}
	return nil
}

// makeTruncArray returns a pointer to a fresh [n]truncPoint for the sizes truncCases uses.
func makeTruncArray(n int) any {
	switch n {
	case 6:
		return new([6]truncPoint)
	case 6000:
		return new([6000]truncPoint)
	}
	panic(fmt.Sprintf("no array of %d", n))
}

func truncArrayElems(p any) []truncPoint {
	switch a := p.(type) {
	case *[6]truncPoint:
		return a[:]
	case *[6000]truncPoint:
		return a[:]
	}
	panic(fmt.Sprintf("%T", p))
}

// A huge message truncated into a few elements: the receive reports ErrTruncate with the count that fit, the
// next message comes whole, and the receiving rank allocates nothing near the message's size (a device used to
// drain the whole message into scratch). Into a short slice, into nil (no elements wanted), into another type (a
// type error), and into a short View, from a remote sender in every mode but onenode (where it is local).
func TestModesTruncationHuge(t *testing.T) {
	const n = 8 << 20 // int32s: 32 MiB
	const fits = 5
	harness.Run(t, 3, func(c *gompj.Comm) error {
		me := c.Rank()
		var big []int32
		if me == 0 {
			big = make([]int32, n)
			for i := range big {
				big[i] = truncPattern(7, 0, i)
			}
		}
		for k := range 4 {
			if err := c.Barrier(); err != nil {
				return err
			}
			if me == 0 {
				for dst := 1; dst < c.Size(); dst++ {
					if err := c.Send(big, dst, truncMsg); err != nil {
						return err
					}
					if err := c.Send([]int32{int32(k) + 42}, dst, truncNext); err != nil {
						return err
					}
				}
				continue
			}
			buf := make([]int32, 3*fits)
			var into any
			wantErr, wantCount := gompj.ErrTruncate, fits
			switch k {
			case 0:
				into = buf[:fits]
			case 1:
				into, wantCount = nil, 0
			case 2:
				into, wantErr, wantCount = make([]float32, fits), gompj.ErrType, n
			case 3:
				v, err := gompj.Vector(buf, fits, 1, 3)
				if err != nil {
					return err
				}
				into = v
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			st, err := c.Recv(into, 0, truncMsg)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, wantErr) {
				return fmt.Errorf("case %d: got error %v, want %v", k, err, wantErr)
			}
			if k != 2 && st.Count() != wantCount {
				return fmt.Errorf("case %d: Count %d, want %d", k, st.Count(), wantCount)
			}
			for i := range buf {
				want := int32(0)
				switch {
				case k == 0 && i < fits:
					want = truncPattern(7, 0, i)
				case k == 3 && i%3 == 0:
					want = truncPattern(7, 0, i/3)
				}
				if buf[i] != want {
					return fmt.Errorf("case %d: element %d is %d, want %d", k, i, buf[i], want)
				}
			}
			if d := after.TotalAlloc - before.TotalAlloc; d > 4*n/8 {
				return fmt.Errorf("case %d: receiving a %d-byte message into %d elements allocated %d bytes", k, 4*n, fits, d)
			}
			next := []int32{0}
			if _, err := c.Recv(next, 0, truncNext); err != nil || next[0] != int32(k)+42 {
				return fmt.Errorf("case %d: the message after the truncated one: %v, %v", k, next, err)
			}
		}
		return nil
	})
}

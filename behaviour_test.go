package gompj_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gompj/gompj"
	"github.com/gompj/gompj/internal/harness"
	"github.com/gompj/gompj/ranks"
)

// The completion calls over nothing, over nils, and over a request that ended in error, as MPI answers:
//   - Testall of no requests, or only nils: true. Beside nils, false while any request is pending, and then no
//     request is reported (one that failed stays active, its error unreported).
//   - Once all are done, Testall is true and returns the first error (MPI_ERR_IN_STATUS); every request is then
//     reported, and the one that failed delivered what it could (a truncated receive, its prefix).
//   - Waitall waits for every request and returns the first error; the others' data are delivered.
//   - Waitany returns the failed request's index, status and error. Called again without clearing that slot, it
//     does not return it again (a reported request is inactive, as MPI sets it to MPI_REQUEST_NULL): it returns the
//     next request to complete, then -1 (MPI_UNDEFINED) once none is active.
//
// The failing request is a receive truncated by 2 elements. Rank 1 sends only when rank 0 says so, so rank 0 knows
// which requests cannot have completed yet.
func TestModesCompletionCallsAndErrors(t *testing.T) {
	harness.Run(t, 2, func(c *gompj.Comm) error {
		const goTag, badTag, goodTag, markTag = 9, 1, 2, 3
		if c.Rank() == 1 {
			for round := range 3 {
				for _, tag := range []int{badTag, goodTag} {
					if _, err := c.Recv([]int{0}, 0, goTag); err != nil {
						return err
					}
					if err := c.Send([]int32{int32(round), 11, 12, 13}, 0, tag); err != nil {
						return err
					}
					if err := c.Send([]int{0}, 0, markTag); err != nil { // after the message: it has arrived
						return err
					}
				}
			}
			return nil
		}
		if ok, err := gompj.Testall(); !ok || err != nil {
			return fmt.Errorf("Testall(): %v %v, want true", ok, err)
		}
		if ok, err := gompj.Testall(nil, nil); !ok || err != nil {
			return fmt.Errorf("Testall(nil, nil): %v %v, want true", ok, err)
		}
		if err := gompj.Waitall(nil); err != nil {
			return fmt.Errorf("Waitall(nil): %v", err)
		}
		// release lets rank 1 send the next message and returns once it has arrived (and, being small, matched).
		release := func() error {
			if err := c.Send([]int{0}, 1, goTag); err != nil {
				return err
			}
			_, err := c.Recv([]int{0}, 1, markTag)
			return err
		}
		post := func() (bad, good []int32, rb, rg *gompj.Request, err error) {
			bad, good = make([]int32, 2), make([]int32, 4)
			if rb, err = c.Irecv(bad, 1, badTag); err == nil {
				rg, err = c.Irecv(good, 1, goodTag)
			}
			return
		}
		checkData := func(round int, bad, good []int32) error {
			if !slices.Equal(bad, []int32{int32(round), 11}) || !slices.Equal(good, []int32{int32(round), 11, 12, 13}) {
				return fmt.Errorf("round %d: received %v (the 2 that fit) and %v", round, bad, good)
			}
			return nil
		}

		// Testall.
		bad, good, rb, rg, err := post()
		if err != nil {
			return err
		}
		if ok, err := gompj.Testall(nil, rb, nil, rg); ok || err != nil {
			return fmt.Errorf("Testall with nothing sent: %v %v, want false", ok, err)
		}
		if err := release(); err != nil { // the truncated one is done, the other pending
			return err
		}
		if ok, err := gompj.Testall(nil, rb, nil, rg); ok || err != nil {
			return fmt.Errorf("Testall with one failed and one pending: %v %v, want false and no error yet", ok, err)
		}
		if err := release(); err != nil {
			return err
		}
		if ok, err := gompj.Testall(nil, rb, nil, rg); !ok || !errors.Is(err, gompj.ErrTruncate) {
			return fmt.Errorf("Testall with all done, one truncated: %v %v, want true and ErrTruncate", ok, err)
		}
		if err := checkData(0, bad, good); err != nil {
			return err
		}
		if ok, err := gompj.Testall(rb, rg); !ok || err != nil {
			return fmt.Errorf("Testall again over reported requests: %v %v, want true and no error", ok, err)
		}

		// Waitall.
		if bad, good, rb, rg, err = post(); err != nil {
			return err
		}
		if err := c.Send([]int{0}, 1, goTag); err != nil {
			return err
		}
		if err := c.Send([]int{0}, 1, goTag); err != nil {
			return err
		}
		if err := gompj.Waitall(rb, nil, rg); !errors.Is(err, gompj.ErrTruncate) {
			return fmt.Errorf("Waitall with a truncated receive: %v, want ErrTruncate", err)
		}
		for range 2 {
			if _, err := c.Recv([]int{0}, 1, markTag); err != nil {
				return err
			}
		}
		if err := checkData(1, bad, good); err != nil {
			return err
		}

		// Waitany, called again without clearing the finished slot.
		if bad, good, rb, rg, err = post(); err != nil {
			return err
		}
		reqs := []*gompj.Request{rb, nil, rg}
		if err := release(); err != nil {
			return err
		}
		i, st, err := gompj.Waitany(reqs...)
		if i != 0 || !errors.Is(err, gompj.ErrTruncate) || st.Count() != 2 || st.Source != 1 || st.Tag != badTag {
			return fmt.Errorf("Waitany with the truncated receive done: %d %+v (count %d) %v, want 0 and ErrTruncate",
				i, st, st.Count(), err)
		}
		if err := release(); err != nil {
			return err
		}
		if i, st, err = gompj.Waitany(reqs...); i != 2 || err != nil || st.Count() != 4 {
			return fmt.Errorf("Waitany again, slot 0 not cleared: %d %+v %v, want 2", i, st, err)
		}
		if i, _, err = gompj.Waitany(reqs...); i != -1 || err != nil {
			return fmt.Errorf("Waitany with every request reported: %d %v, want -1", i, err)
		}
		return checkData(2, bad, good)
	})
}

// AnySource receives see local and remote senders in the order their messages arrived. Rank 0 lets one sender
// at a time go, and waits (Probe) until that sender's message has arrived before it lets the next go, so the
// arrival order is known; with 3 node processes rank 1 is local to rank 0 and ranks 2 and 3 are remote.
//   - Queued first: the three messages wait in the unexpected queue; three AnySource receives take them in
//     arrival order.
//   - Posted first: three AnySource receives wait; each message, as it arrives, completes the earliest of them.
func TestModesAnySourceArrivalOrder(t *testing.T) {
	harness.Run(t, 4, func(c *gompj.Comm) error {
		const goTag, dataTag = 1, 2
		orders := [][]int{{2, 1, 3}, {1, 3, 2}, {3, 2, 1}, {2, 3, 1}}
		if c.Rank() != 0 {
			for range 2 * len(orders) {
				if _, err := c.Recv([]int{0}, 0, goTag); err != nil {
					return err
				}
				if err := c.Send([]int{c.Rank()}, 0, dataTag); err != nil {
					return err
				}
			}
			return nil
		}
		for _, order := range orders {
			// Queued first.
			for _, s := range order {
				if err := c.Send([]int{0}, s, goTag); err != nil {
					return err
				}
				if _, err := c.Probe(s, dataTag); err != nil {
					return err
				}
			}
			for k, s := range order {
				b := []int{-1}
				st, err := c.Recv(b, gompj.AnySource, dataTag)
				if err != nil {
					return err
				}
				if st.Source != s || b[0] != s {
					return fmt.Errorf("arrival order %v, queued: receive %d got rank %d's message", order, k, st.Source)
				}
			}
			// Posted first.
			bufs := make([][]int, len(order))
			reqs := make([]*gompj.Request, len(order))
			for k := range reqs {
				bufs[k] = []int{-1}
				r, err := c.Irecv(bufs[k], gompj.AnySource, dataTag)
				if err != nil {
					return err
				}
				reqs[k] = r
			}
			for k, s := range order {
				if err := c.Send([]int{0}, s, goTag); err != nil {
					return err
				}
				st, err := reqs[k].Wait()
				if err != nil {
					return err
				}
				if st.Source != s || bufs[k][0] != s {
					return fmt.Errorf("arrival order %v, posted: receive %d got rank %d's message", order, k, st.Source)
				}
			}
		}
		return nil
	})
}

type remoteObject struct {
	Name string
	Vals []float64
}

// Object messages across nodes: Probe and Iprobe report them (an object, one element, its encoded size), eager or
// rendezvous; received into a slice they fail with ErrType and are consumed.
func TestModesObjectProbeAndType(t *testing.T) {
	harness.Run(t, 3, func(c *gompj.Comm) error {
		sizes := []int{3, 40000} // encoded: under and over the network's eager limit
		if c.Rank() == 0 {
			for dst := 1; dst < c.Size(); dst++ {
				for k, n := range sizes {
					o := remoteObject{Name: fmt.Sprint("to ", dst), Vals: make([]float64, n)}
					o.Vals[n-1] = float64(dst)
					if err := c.Send(o, dst, 2*k); err != nil { // probed, then received
						return err
					}
					if err := c.Send(o, dst, 2*k+1); err != nil { // received into a slice
						return err
					}
				}
				if err := c.Send([]int{42}, dst, 99); err != nil {
					return err
				}
			}
			return nil
		}
		for k, n := range sizes {
			st, err := c.Probe(0, 2*k)
			if err != nil {
				return err
			}
			if st.Type() != ranks.TypeObject || st.Count() != 1 || st.Bytes() < 8*n || st.Source != 0 || st.Tag != 2*k {
				return fmt.Errorf("Probe of an object of %d floats: %+v (type %v, count %d, %d bytes)", n, st,
					st.Type(), st.Count(), st.Bytes())
			}
			st2, ok, err := c.Iprobe(0, 2*k)
			if !ok || err != nil || st2.Bytes() != st.Bytes() || st2.Type() != ranks.TypeObject {
				return fmt.Errorf("Iprobe after Probe: %+v %v %v", st2, ok, err)
			}
			var o remoteObject
			if st3, err := c.Recv(&o, 0, 2*k); err != nil || st3.Bytes() != st.Bytes() || o.Name != fmt.Sprint("to ", c.Rank()) ||
				len(o.Vals) != n || o.Vals[n-1] != float64(c.Rank()) {
				return fmt.Errorf("receiving the probed object: %v, %q with %d values", err, o.Name, len(o.Vals))
			}
			if _, err := c.Recv(make([]float64, n+10), 0, 2*k+1); !errors.Is(err, gompj.ErrType) {
				return fmt.Errorf("an object of %d floats received into []float64: %v, want ErrType", n, err)
			}
		}
		b := []int{0}
		if _, err := c.Recv(b, 0, 99); err != nil || b[0] != 42 {
			return fmt.Errorf("after the objects: %v %v", b, err)
		}
		if _, ok, err := c.Iprobe(gompj.AnySource, gompj.AnyTag); ok || err != nil {
			return fmt.Errorf("a message is left over (%v)", err)
		}
		return nil
	})
}

// abortedMarker is what a rank of an aborting job prints when one of its calls returned ErrAborted.
const abortedMarker = "gompj-test: saw ErrAborted on rank "

// runAborting runs body, which ends with a rank calling Abort(code), on np ranks of one node and on 3 node
// processes (ranks in blocks: rank 0 and 1 on the first). Every rank must end: the job's result is code on every
// node, and each of the other np-1 ranks must have seen ErrAborted from the call it was blocked in (it calls saw).
func runAborting(t *testing.T, np, code int, body func(c *gompj.Comm, saw func()) error) {
	t.Helper()
	t.Run("onenode", func(t *testing.T) {
		var mu sync.Mutex
		seen := 0
		err := gompj.RunWith(gompj.Config{Ranks: np, Nodes: 1}, func(c *gompj.Comm) error {
			return body(c, func() { mu.Lock(); seen++; mu.Unlock() })
		})
		var ae *gompj.AbortError
		if !errors.As(err, &ae) || ae.Code != code {
			t.Fatalf("the job ended with %v, want Abort(%d)", err, code)
		}
		if seen != np-1 {
			t.Fatalf("%d of the %d other ranks saw ErrAborted", seen, np-1)
		}
	})
	t.Run("nodes", func(t *testing.T) {
		j := harness.Procs(t, harness.Spec{Ranks: np, Nodes: 3}, func(c *gompj.Comm) error {
			return body(c, func() { fmt.Printf("%s%d\n", abortedMarker, c.Rank()) })
		})
		seen := 0
		var all strings.Builder
		for _, r := range j.Wait(t) {
			all.WriteString(r.Output)
			seen += strings.Count(r.Output, abortedMarker)
			if r.Code != code {
				t.Errorf("node %d exited with %d, want %d", r.Node, r.Code, code)
			}
		}
		if seen != np-1 {
			t.Errorf("%d of the %d other ranks saw ErrAborted", seen, np-1)
		}
		for _, line := range strings.Split(all.String(), "\n") {
			if strings.HasPrefix(line, "gompj-test: ") && !strings.HasPrefix(line, abortedMarker) {
				t.Log(line)
			}
		}
		if t.Failed() {
			t.Logf("outputs:\n%s", all.String())
		}
	})
}

// A rank aborts while every other rank waits in a collective (rank 1 with it on one node, the others on nodes of
// their own): every rank's collective returns ErrAborted and the job ends with the code.
func TestAbortWhileOthersWaitInACollective(t *testing.T) {
	runAborting(t, 4, 7, func(c *gompj.Comm, saw func()) error {
		if c.Rank() == 0 {
			for r := 1; r < c.Size(); r++ { // every other rank is about to enter the collective
				if _, err := c.Recv([]int{0}, r, 1); err != nil {
					return err
				}
			}
			c.Abort(7)
		}
		if err := c.Send([]int{0}, 0, 1); err != nil {
			return err
		}
		err := c.Allreduce(make([]float64, 1000), make([]float64, 1000), gompj.Sum) // rank 0 never comes
		if errors.Is(err, gompj.ErrAborted) {
			saw()
		}
		return err
	})
}

// A rank aborts while a large message is moving between two others (across nodes with 3 node processes): both
// ends return ErrAborted, from the transfer if it was still moving, else from the barrier after it, which the
// aborting rank never joins.
func TestAbortDuringALargeTransfer(t *testing.T) {
	const n = 4 << 20 // 32 MiB of float64
	runAborting(t, 4, 9, func(c *gompj.Comm, saw func()) error {
		const ready = 1
		var req *gompj.Request
		var err error
		switch c.Rank() {
		case 1: // the aborter: once the transfer has started on both sides
			for _, r := range []int{0, 3} {
				if _, err := c.Recv([]int{0}, r, ready); err != nil {
					return err
				}
			}
			c.Abort(9)
		case 0:
			if req, err = c.Isend(make([]float64, n), 3, 5); err != nil {
				return err
			}
		case 3:
			if req, err = c.Irecv(make([]float64, n), 0, 5); err != nil {
				return err
			}
		}
		if req != nil {
			if err := c.Send([]int{0}, 1, ready); err != nil {
				return err
			}
			if _, err := req.Wait(); err != nil {
				if errors.Is(err, gompj.ErrAborted) {
					fmt.Printf("gompj-test: rank %d: the transfer was cut short\n", c.Rank())
					saw()
				}
				return err
			}
		}
		err = c.Barrier()
		if errors.Is(err, gompj.ErrAborted) {
			saw()
		}
		return err
	})
}

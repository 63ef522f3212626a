package gompj_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	. "github.com/gompj/gompj"
)

// A user's op that panics inside a nonblocking collective fails the job with an error that carries the panic,
// whoever ran the step: the rank itself, in Wait (the rank panicked, as in the blocking form), or a worker of the
// node's pool on no rank's goroutine (the request fails), where the panic used to end the whole node process.
func TestNonblockingOpPanicFailsRequest(t *testing.T) {
	boom := NewOp(func(in, inout []float64) { panic("boom in a user op") }, true)
	for _, n := range []int{1, 1 << 14} { // inline: every member combines it all; large: each its share
		err := RunWith(Config{Ranks: 2}, func(c *Comm) error {
			r, err := c.Iallreduce(make([]float64, n), make([]float64, n), boom)
			if err != nil {
				return err
			}
			_, err = r.Wait()
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "boom in a user op") {
			t.Errorf("%d elements: %v", n, err)
		}
	}
}

// Members that start different collectives at the same point (an erroneous program) get an error, not a panic: a
// scatter's members read the root's shared-memory entry as a scatter's, and a gather root's is laid out otherwise.
func TestNonblockingCollectiveMismatch(t *testing.T) {
	err := RunWith(Config{Ranks: 2}, func(c *Comm) error {
		for _, coll := range []string{"igather", "iscatter"} {
			if err := c.ForceAlgorithm(coll, "shm"); err != nil {
				return err
			}
		}
		buf, all := make([]float64, 4), make([]float64, 8)
		var r *Request
		var err error
		if c.Rank() == 0 {
			r, err = c.Igather(buf, all, 0)
		} else {
			r, err = c.Iscatter(all, buf, 0)
		}
		if err != nil {
			return err
		}
		_, err = r.Wait()
		if c.Rank() == 1 && (!errors.Is(err, ErrArg) || !strings.Contains(err.Error(), "collective mismatch")) {
			return fmt.Errorf("the scatter's member: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Members that each read the others' entries check them too: an Ibcast's root against an Iallreduce's member, whose
// sum took the root's buffer as the root's contribution and came out wrong without a word; an Ialltoall against an
// Iallgather; and a member whose predecessor in an Iscan started an Iexscan. Small and large, whatever the path.
func TestNonblockingPeerMismatch(t *testing.T) {
	type start func(c *Comm, n int) (*Request, error)
	bcast := func(c *Comm, n int) (*Request, error) { return c.Ibcast(make([]float64, n), 0) }
	allreduce := func(c *Comm, n int) (*Request, error) {
		return c.Iallreduce(make([]float64, n), make([]float64, n), Sum)
	}
	alltoall := func(c *Comm, n int) (*Request, error) {
		return c.Ialltoall(make([]float64, 2*n), make([]float64, 2*n))
	}
	allgather := func(c *Comm, n int) (*Request, error) {
		return c.Iallgather(make([]float64, n), make([]float64, 2*n))
	}
	scan := func(c *Comm, n int) (*Request, error) { return c.Iscan(make([]float64, n), make([]float64, n), Sum) }
	exscan := func(c *Comm, n int) (*Request, error) {
		return c.Iexscan(make([]float64, n), make([]float64, n), Sum)
	}
	for _, k := range []struct {
		name     string
		r0, r1   start
		detector int // the rank that must see the mismatch
	}{
		{"bcast/allreduce", bcast, allreduce, 1},
		{"alltoall/allgather", alltoall, allgather, 1},
		{"exscan/scan", exscan, scan, 1},
	} {
		for _, n := range []int{1, 1 << 14} {
			err := RunWith(Config{Ranks: 2}, func(c *Comm) error {
				for _, coll := range []string{"ibcast", "iallreduce", "ialltoall", "iallgather", "iscan", "iexscan"} {
					if err := c.ForceAlgorithm(coll, "shm"); err != nil {
						return err
					}
				}
				s := k.r0
				if c.Rank() == 1 {
					s = k.r1
				}
				r, err := s(c, n)
				if err != nil {
					return err
				}
				_, err = r.Wait()
				if c.Rank() == k.detector && (!errors.Is(err, ErrArg) || !strings.Contains(err.Error(), "collective mismatch")) {
					return fmt.Errorf("%s, %d elements: rank %d: %v", k.name, n, c.Rank(), err)
				}
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		}
	}
}

// The blocking forms too: the scatter's member reports the mismatch, where it used to panic reading the root's slot
// as a scatter's (on a goroutine of the program's own, that ended the process). It does not acknowledge the root's
// publication, and the job ends (collectives' sameCall): an acknowledgement of a publication of another
// collective let a root return while a reader of its own collective still copied from its buffer.
func TestCollectiveMismatch(t *testing.T) {
	err := RunWith(Config{Ranks: 2}, func(c *Comm) error {
		for _, coll := range []string{"gather", "scatter"} {
			if err := c.ForceAlgorithm(coll, "shm"); err != nil {
				return err
			}
		}
		buf, all := make([]float64, 4), make([]float64, 8)
		done := make(chan error, 1)
		go func() { // a goroutine of the program's own: a panic here is nobody's to recover
			if c.Rank() == 0 {
				done <- c.Gather(buf, all, 0)
			} else {
				done <- c.Scatter(all, buf, 0)
			}
		}()
		err := <-done
		if c.Rank() == 1 && (!errors.Is(err, ErrArg) || !strings.Contains(err.Error(), "collective mismatch")) {
			return fmt.Errorf("the scatter's member: %v", err)
		}
		if c.Rank() == 0 && !errors.Is(err, ErrAborted) {
			return fmt.Errorf("the gather's root: %v, want ErrAborted", err)
		}
		return nil
	})
	var re *RankError
	if !errors.As(err, &re) || re.Rank != 1 || !strings.Contains(err.Error(), "collective mismatch") {
		t.Fatalf("the job returned %v, want it ended by rank 1's collective mismatch", err)
	}
}

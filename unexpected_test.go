package gompj_test

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"testing"

	"github.com/gompj/gompj"
	"github.com/gompj/gompj/internal/harness"
)

// A rank floods a rank of its own node that does not receive (it is busy elsewhere, here: waiting for the flood to
// hit the bound). The receiver's unexpected queue must stop growing at its share of GOMPJ_UNEXPECTED_LIMIT: past
// it, the sender's messages go rendezvous and it waits for the match. Then the receiver gets every message, in
// order. Without the bound, the whole flood would sit in the receiver's queue (flood bytes and more).
func TestUnexpectedBoundSleepingReceiver(t *testing.T) {
	const (
		limit = 1 << 20 // two ranks: a share of 512 KiB each
		share = limit / 2
		size  = 1 << 10
		flood = 32 << 20 // what the sender offers: 64 times the share
		n     = flood / size
	)
	switched := make(chan int, 1) // the index of the first send that did not complete at once, or -1
	var before, at runtime.MemStats
	k := 0 // what rank 1 got from switched (read after RunWith)
	err := gompj.RunWith(gompj.Config{Ranks: 2, UnexpectedLimit: limit}, func(c *gompj.Comm) error {
		if c.Rank() == 0 {
			runtime.GC()
			runtime.ReadMemStats(&before)
			first := -1
			for k := range n {
				b := make([]byte, size)
				b[0], b[1], b[size-1] = byte(k), byte(k>>8), byte(k>>16)
				if first >= 0 {
					if err := c.Send(b, 1, 0); err != nil { // waits for the match, which is what bounds the queue
						return err
					}
					continue
				}
				r, err := c.Isend(b, 1, 0)
				if err != nil {
					return err
				}
				_, done, err := r.Test()
				if err != nil {
					return err
				}
				if !done {
					first = k
					runtime.GC()
					runtime.ReadMemStats(&at)
					switched <- k
					if _, err := r.Wait(); err != nil {
						return err
					}
				}
			}
			if first < 0 {
				runtime.GC()
				runtime.ReadMemStats(&at)
				switched <- -1
			}
			return nil
		}
		// The receiver is busy until the sender reports the switch (or the end of its flood).
		if k = <-switched; k < 0 {
			return fmt.Errorf("all %d messages (%d MiB) went eager to a rank that received none; the heap grew by %d MiB",
				n, flood>>20, (int64(at.HeapAlloc)-int64(before.HeapAlloc))>>20)
		}
		b := make([]byte, size)
		for k := range n {
			st, err := c.Recv(b, 0, 0)
			if err != nil {
				return err
			}
			if st.Count() != size || b[0] != byte(k) || b[1] != byte(k>>8) || b[size-1] != byte(k>>16) {
				return fmt.Errorf("message %d: count %d, stamp %d", k, st.Count(), int(b[0])|int(b[1])<<8|int(b[size-1])<<16)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	grew := int64(at.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("the sender turned rendezvous at message %d of %d (%d KiB queued eagerly); the heap grew by %d KiB",
		k, n, k*size>>10, grew>>10)
	if k*size > share {
		t.Errorf("%d messages of %d bytes queued eagerly: more than the share of %d bytes", k, size, share)
	}
	if k*(size+512) < share/2 {
		t.Errorf("only %d messages of %d bytes queued eagerly: far less than the share of %d bytes", k, size, share)
	}
	// The queue holds at most the share, plus one message in flight, plus what the runtime and the test allocate
	// meanwhile: a few MiB at most, against 32 MiB unbounded.
	if grew > share+4<<20 {
		t.Errorf("the heap grew by %d KiB while the receiver slept (share %d KiB)", grew>>10, share>>10)
	}
}

// The switch to rendezvous under GOMPJ_UNEXPECTED_LIMIT, on both sides of it: the network device's credit toward
// a node, and a rank's share for senders of its own node. Rank 0 floods every other rank with messages, empty ones
// among them, until sends stop completing at once (the switch), and on past it; the receivers then take every
// message, in order across the switch. With one rank per process every peer is remote, on one node every peer is
// local, with 3 node processes rank 0 has one local and two remote peers.
func TestModesUnexpectedLimitSwitch(t *testing.T) {
	// 256 KiB: the least share per rank; across nodes, 128 or 85 KiB of credit per peer with the network's eager
	// limit at 4 KiB, so that eager messages fit.
	t.Setenv("GOMPJ_UNEXPECTED_LIMIT", strconv.Itoa(256<<10))
	t.Setenv("GOMPJ_NET_EAGER_LIMIT", strconv.Itoa(4<<10))
	const (
		msgs     = 1000 // about 600 KiB: past every bound above, which the flood reaches after 200-300 messages
		dataTag  = 0    // with the message's index in the payload; the empty ones by their place in the order
		goTag    = 1
		stampLen = 1000
	)
	size := func(k int) int { // empty, then a kilobyte, in runs of varying length
		if k%7 < 3 {
			return 0
		}
		return stampLen
	}
	harness.Run(t, 4, func(c *gompj.Comm) error {
		me, np := c.Rank(), c.Size()
		if me == 0 {
			var reqs []*gompj.Request
			for d := 1; d < np; d++ {
				first, last := -1, -1
				for k := range msgs {
					b := make([]byte, size(k))
					if len(b) > 0 {
						b[0], b[1], b[len(b)-1] = byte(k), byte(k>>8), byte(d)
					}
					r, err := c.Isend(b, d, dataTag)
					if err != nil {
						return err
					}
					_, done, err := r.Test()
					if err != nil {
						return err
					}
					if !done {
						if first < 0 {
							first = k
						}
						last = k
						reqs = append(reqs, r)
					}
				}
				if first < 0 || first == 0 || last != msgs-1 {
					return fmt.Errorf("to rank %d: sends first waited at message %d, last at %d, of %d", d, first, last, msgs)
				}
				// The go-ahead is queued after the flood, so it is rendezvous too: Isend.
				r, err := c.Isend([]int{first}, d, goTag)
				if err != nil {
					return err
				}
				reqs = append(reqs, r)
			}
			return gompj.Waitall(reqs...)
		}
		first := []int{0}
		if _, err := c.Recv(first, 0, goTag); err != nil {
			return err
		}
		b := make([]byte, stampLen)
		for k := range msgs {
			st, err := c.Recv(b, 0, dataTag)
			if err != nil {
				return err
			}
			if st.Count() != size(k) {
				return fmt.Errorf("message %d of %d (the switch was at %d): %d bytes, want %d", k, msgs, first[0],
					st.Count(), size(k))
			}
			if size(k) > 0 && (b[0] != byte(k) || b[1] != byte(k>>8) || b[stampLen-1] != byte(me)) {
				return fmt.Errorf("message %d of %d (the switch was at %d): stamp %d", k, msgs, first[0],
					int(b[0])|int(b[1])<<8)
			}
		}
		if _, ok, err := c.Iprobe(gompj.AnySource, gompj.AnyTag); ok || err != nil {
			return errors.Join(errors.New("a message is left over"), err)
		}
		return nil
	})
}

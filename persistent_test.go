package gompj_test

import (
	"fmt"
	"testing"

	"github.com/gompj/gompj"
)

// A persistent Start allocates nothing at steady state for primitive slices, eager or rendezvous, whether the
// message finds its receive posted or waits for it.
func TestPersistentStartAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, n := range []int{8, 1 << 20} {
		const runs = 200
		run(t, 2, func(c *gompj.Comm) error {
			peer := 1 - c.Rank()
			sbuf, rbuf := make([]byte, n), make([]byte, n)
			send, err := c.SendInit(sbuf, peer, 0)
			if err != nil {
				return err
			}
			recv, err := c.RecvInit(rbuf, peer, 0)
			if err != nil {
				return err
			}
			step := func() error {
				if err := gompj.Startall(recv, send); err != nil {
					return err
				}
				return gompj.Waitall(send, recv)
			}
			if c.Rank() == 1 {
				for i := 0; i < runs+1; i++ { // AllocsPerRun runs once more to warm up
					if err := step(); err != nil {
						return err
					}
				}
				// The sends started one by one below: a burst to warm up with, a message of none to end it, then
				// the measured burst.
				for i := 0; i < 2*(runs+1); i++ {
					if _, err := c.Recv(rbuf, 0, 0); err != nil {
						return err
					}
					if i == runs {
						if err := c.Send(nil, 0, 1); err != nil {
							return err
						}
					}
				}
				return nil
			}
			allocs := testing.AllocsPerRun(runs, func() {
				if e := step(); e != nil {
					err = e
				}
			})
			if err != nil {
				return err
			}
			if allocs > 0 {
				return fmt.Errorf("%d-byte persistent exchange: %v allocations per Startall+Waitall", n, allocs)
			}
			// Start and Wait one by one too. The sender may run ahead of its receiver by up to the whole burst, and
			// each message waiting to be received needs a record: the warm-up burst leaves as many recycled.
			for i := 0; i < runs+1; i++ {
				if err := send.Start(); err != nil {
					return err
				}
				if _, err := send.Wait(); err != nil {
					return err
				}
			}
			if _, err := c.Recv(nil, 1, 1); err != nil {
				return err
			}
			allocs = testing.AllocsPerRun(runs, func() {
				if e := send.Start(); e != nil {
					err = e
				}
				if _, e := send.Wait(); e != nil {
					err = e
				}
			})
			if allocs > 0 || err != nil {
				return fmt.Errorf("%d-byte persistent send: %v allocations per Start+Wait (%v)", n, allocs, err)
			}
			return nil
		})
	}
}

package gompj_test

import (
	"fmt"
	"log"

	"github.com/gompj/gompj"
)

// Persistent requests are built once and restarted: each Start sends the slice as it is then. Every rank passes
// a counter to its right neighbour three times with the same two requests.
func ExampleComm_SendInit() {
	err := gompj.RunWith(gompj.Config{Ranks: 3}, func(c *gompj.Comm) error {
		me, n := c.Rank(), c.Size()
		out, in := []int{0}, []int{0}
		send, err := c.SendInit(out, (me+1)%n, 0)
		if err != nil {
			return err
		}
		recv, err := c.RecvInit(in, (me+n-1)%n, 0)
		if err != nil {
			return err
		}
		for step := 1; step <= 3; step++ {
			out[0] = 10*step + me
			if err := gompj.Startall(recv, send); err != nil {
				return err
			}
			if err := gompj.Waitall(recv, send); err != nil {
				return err
			}
			if me == 0 {
				fmt.Println("step", step, "rank 0 got", in[0])
			}
		}
		send.Free()
		return recv.Free()
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// step 1 rank 0 got 12
	// step 2 rank 0 got 22
	// step 3 rank 0 got 32
}

// Mprobe takes the message it finds out of matching, so the goroutine that probed it is the one that receives it,
// into a buffer sized from the status.
func ExampleComm_Mprobe() {
	err := gompj.RunWith(gompj.Config{Ranks: 2}, func(c *gompj.Comm) error {
		if c.Rank() == 1 {
			return c.Send([]int32{4, 5, 6}, 0, 3)
		}
		m, st, err := c.Mprobe(gompj.AnySource, gompj.AnyTag)
		if err != nil {
			return err
		}
		buf := make([]int32, st.Count())
		if _, err := m.Recv(buf); err != nil {
			return err
		}
		fmt.Println("from rank", st.Source, buf)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: from rank 1 [4 5 6]
}

// A buffered send returns at once, whatever the receiver is doing: here it has not posted its receive yet, and
// waits for a later message first.
func ExampleComm_Bsend() {
	err := gompj.RunWith(gompj.Config{Ranks: 2}, func(c *gompj.Comm) error {
		big := make([]byte, 1<<20) // over the eager limit: a standard Send would wait for the receive
		if c.Rank() == 0 {
			if err := c.BufferAttach(make([]byte, len(big)+gompj.BsendOverhead)); err != nil {
				return err
			}
			if err := c.Bsend(big, 1, 1); err != nil {
				return err
			}
			if err := c.Send([]int{1}, 1, 2); err != nil {
				return err
			}
			_, err := c.BufferDetach() // waits until the buffered message is delivered
			return err
		}
		if _, err := c.Recv(make([]int, 1), 0, 2); err != nil {
			return err
		}
		st, err := c.Recv(big, 0, 1)
		fmt.Println(st.Count(), "bytes")
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: 1048576 bytes
}

// A receive that no message matched can always be cancelled; it still completes, saying so.
func ExampleRequest_Cancel() {
	err := gompj.RunWith(gompj.Config{Ranks: 1}, func(c *gompj.Comm) error {
		r, err := c.Irecv(make([]int, 1), 0, 99)
		if err != nil {
			return err
		}
		if err := r.Cancel(); err != nil {
			return err
		}
		st, err := r.Wait()
		fmt.Println("cancelled:", st.Canceled())
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: cancelled: true
}

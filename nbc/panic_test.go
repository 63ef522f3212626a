package nbc

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gompj/gompj/node"
	"github.com/gompj/gompj/ranks"
)

// A panic in a step that a worker of the pool runs (on no rank's goroutine, where it would end the node process)
// ends the op instead: its request fails with an error that carries the panic, and the op is done.
func TestWorkerPanicEndsOp(t *testing.T) {
	err := node.Run(node.Config{Ranks: 1}, func(c *ranks.Comm) error {
		o := newOp(c)
		s := &Schedule{}
		s.Do(func() error { panic("boom on a worker") })
		o.m = Machine{s: s}
		o.m.Reset()
		o.tr = newTransport(o, c, len(s.Steps))
		o.setReq(c.OpRequest(o))
		ranks.Launch(o.req)
		o.work() // what the pool runs
		if !o.done.Load() || o.state.Load() != opIdle {
			return fmt.Errorf("after the panic: done %v, state %d", o.done.Load(), o.state.Load())
		}
		if _, err := o.req.Wait(); !errors.Is(err, ranks.ErrInternal) || !strings.Contains(err.Error(), "boom on a worker") {
			return fmt.Errorf("Wait: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

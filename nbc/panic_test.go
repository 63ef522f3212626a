package nbc

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gompj/gompj/node"
	"github.com/gompj/gompj/ranks"
)

// A panic in a step run aside from the op's own rank's calls ends the op instead of the node process (a worker of
// the pool, on no rank's goroutine) or another rank (the inline hook, on the goroutine of the member that completed
// a tiny phase): its request fails with an error that carries the panic and says where it ran, and the op is done.
func TestPanicAsideEndsOp(t *testing.T) {
	for _, c := range []struct {
		name  string
		run   func(*op)
		where string
	}{
		{"worker", (*op).work, "on a worker"},
		{"inline", (*op).runInline, "on another rank's goroutine"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := node.Run(node.Config{Ranks: 1}, func(cm *ranks.Comm) error {
				o := newOp(cm)
				s := &Schedule{}
				s.Do(func() error { panic("boom aside") })
				o.m = Machine{s: s}
				o.m.Reset()
				o.tr = newTransport(o, cm, len(s.Steps))
				o.setReq(cm.OpRequest(o))
				ranks.Launch(o.req)
				c.run(o)
				if !o.done.Load() || o.state.Load() != opIdle {
					return fmt.Errorf("after the panic: done %v, state %d", o.done.Load(), o.state.Load())
				}
				_, err := o.req.Wait()
				if !errors.Is(err, ranks.ErrInternal) || !strings.Contains(err.Error(), "boom aside") ||
					!strings.Contains(err.Error(), c.where) {
					return fmt.Errorf("Wait: %v", err)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

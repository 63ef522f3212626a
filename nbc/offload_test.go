package nbc

import (
	"fmt"
	"testing"

	"github.com/gompj/gompj/node"
	"github.com/gompj/gompj/ranks"
)

// heldExecutor keeps the tasks handed to it until the test runs them.
type heldExecutor struct{ tasks []func() }

func (e *heldExecutor) Submit(task func()) { e.tasks = append(e.tasks, task) }

// An op that sends large messages to other nodes (offload) has each run started by a worker: the starting call
// hands it to the pool and runs no step itself; a Wait that comes before the worker runs it; the worker's late task
// then finds it finished. Any other op runs its first round in the starting call.
func TestFirstRoundOffload(t *testing.T) {
	err := node.Run(node.Config{Ranks: 1}, func(c *ranks.Comm) error {
		for _, offload := range []bool{true, false} {
			ran := 0
			o := newOp(c)
			ex := &heldExecutor{}
			o.exec, o.offload = ex, offload
			s := &Schedule{}
			s.Do(func() error { ran++; return nil })
			o.m = Machine{s: s}
			o.m.Reset()
			o.tr = newTransport(o, c, len(s.Steps))
			o.setReq(c.OpRequest(o))
			ranks.Launch(o.req)
			o.firstRound()
			if offload {
				if ran != 0 || len(ex.tasks) != 1 {
					return fmt.Errorf("offloaded: the starting call ran %d steps and submitted %d tasks", ran, len(ex.tasks))
				}
				if _, err := o.req.Wait(); err != nil || ran != 1 {
					return fmt.Errorf("offloaded: Wait ran %d steps: %v", ran, err)
				}
				ex.tasks[0]() // the worker, late
				if ran != 1 {
					return fmt.Errorf("offloaded: the late worker ran the finished op again (%d)", ran)
				}
				continue
			}
			if ran != 1 || len(ex.tasks) != 0 {
				return fmt.Errorf("inline: the starting call ran %d steps and submitted %d tasks", ran, len(ex.tasks))
			}
			if _, err := o.req.Wait(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

package harness_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gompj/gompj"
	"github.com/gompj/gompj/internal/harness"
)

func TestHarnessModes(t *testing.T) {
	harness.Run(t, 4, func(c *gompj.Comm) error {
		_, err := c.Sendrecv([]int{c.Rank()}, (c.Rank()+1)%c.Size(), 0, []int{0}, (c.Rank()+c.Size()-1)%c.Size(), 0)
		return err
	})
}

// A node that never shows up: the others fail the bootstrap with an error naming it, well before the test's
// own timeout.
func TestBootstrapTimeoutNamesMissingNode(t *testing.T) {
	j := harness.Procs(t, harness.Spec{Ranks: 3, Nodes: 3, Skip: []int{2}, CoordinatorTimeout: 2 * time.Second,
		Timeout: 30 * time.Second}, func(c *gompj.Comm) error { return nil })
	start := time.Now()
	for _, r := range j.Wait(t)[:2] {
		if r.Code == 0 || !strings.Contains(r.Output, "node(s) [2] never registered") {
			t.Errorf("node %d: exit %d\n%s", r.Node, r.Code, r.Output)
		}
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the bootstrap failed after %v", d)
	}
}

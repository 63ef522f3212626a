package harness_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gompj/gompj"
	"github.com/gompj/gompj/internal/harness"
)

func TestHarnessModes(t *testing.T) {
	harness.Run(t, 4, func(c *gompj.Comm) error {
		me, np := c.Rank(), c.Size()
		left := (me + np - 1) % np
		got := []int{-1}
		st, err := c.Sendrecv([]int{me*10 + 7}, (me+1)%np, 3, got, left, 3)
		if err != nil {
			return err
		}
		if got[0] != left*10+7 || st.Source != left || st.Tag != 3 || st.Count() != 1 {
			return fmt.Errorf("rank %d got %d from %d (tag %d, count %d), want %d from %d", me, got[0], st.Source,
				st.Tag, st.Count(), left*10+7, left)
		}
		return nil
	})
}

// A node that never shows up: the others fail the bootstrap with an error naming it, once the coordinator's
// registration timeout (2 s) is over. The job's own timeout (30 s, after which Wait kills it and fails the test) is
// the bound; how long it took is logged.
func TestBootstrapTimeoutNamesMissingNode(t *testing.T) {
	start := time.Now()
	j := harness.Procs(t, harness.Spec{Ranks: 3, Nodes: 3, Skip: []int{2}, CoordinatorTimeout: 2 * time.Second,
		Timeout: 30 * time.Second}, func(c *gompj.Comm) error { return nil })
	for _, r := range j.Wait(t)[:2] {
		if r.Code == 0 || !strings.Contains(r.Output, "node(s) [2] never registered") {
			t.Errorf("node %d: exit %d\n%s", r.Node, r.Code, r.Output)
		}
		t.Logf("node %d failed the bootstrap %v after the job started", r.Node, r.End.Sub(start).Round(time.Millisecond))
	}
}

package gompj_test

import (
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/gompj/gompj"
	"github.com/gompj/gompj/internal/harness"
)

// Devices names what carries a node process's traffic to the others: nothing in one node process, shared memory
// between node processes of one host, the network device when they talk as on different hosts (GOMPJ_HOST_SHM=0),
// and the rdma device when it is the one chosen (the ofi mode).
func TestModesDevices(t *testing.T) {
	harness.Run(t, 3, func(c *gompj.Comm) error {
		local, err := c.SplitNode()
		if err != nil {
			return err
		}
		alone := local.Size() == c.Size()
		if err := local.Free(); err != nil {
			return err
		}
		var want []string
		switch {
		case alone:
		case os.Getenv("GOMPJ_DEV") == "rdma":
			want = []string{"rdma"}
		case os.Getenv("GOMPJ_HOST_SHM") == "0":
			want = []string{"tcp"}
		default:
			want = []string{"shm"}
		}
		if got := c.Devices(); !slices.Equal(got, want) {
			return fmt.Errorf("rank %d: Devices %q, want %q", c.Rank(), got, want)
		}
		var none *gompj.Comm
		if got := none.Devices(); got != nil {
			return fmt.Errorf("a nil communicator's Devices %q", got)
		}
		return nil
	})
}

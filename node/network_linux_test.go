//go:build linux

package node

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gompj/gompj/internal/env"
	"github.com/gompj/gompj/netdev"
	"github.com/gompj/gompj/rdma"
)

// The literal defaults documented for the network devices are the devices' own, so that netdev or rdma used
// directly (a zero field) behaves as the documentation says too.
func TestNetworkDefaultsMatchTheDevice(t *testing.T) {
	for v, want := range map[*env.Var]int64{env.NetEagerLimit: netdev.DefaultEagerLimit,
		env.UnexpectedLimit: netdev.DefaultUnexpectedLimit, env.RegCacheBytes: rdma.DefaultRegCacheBytes} {
		got, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			d, derr := time.ParseDuration(v.Value)
			got, err = int64(d), derr
		}
		if err != nil || got != want {
			t.Errorf("%s defaults to %q, the device to %d", v.Name, v.Value, want)
		}
	}
	// GOMPJ_BUSY_POLL's default depends on the host (busyPoll); its first word is the devices' own.
	first, _, _ := strings.Cut(env.BusyPoll.Default, ";")
	d, err := time.ParseDuration(first)
	for _, dev := range []time.Duration{netdev.DefaultBusyPoll, rdma.DefaultBusyPoll} {
		if err != nil || d != dev {
			t.Errorf("%s defaults to %q, a device to %v", env.BusyPoll.Name, env.BusyPoll.Default, dev)
		}
	}
}

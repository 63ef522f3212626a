//go:build linux

package shm

import (
	"sync"
	"testing"
	"time"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/device/devicetest"
	"github.com/gompj/gompj/rdma"
)

var testSecret = []byte("shm-test-secret-0123456789abcdef")

// shmJob is a conformance job of 3 node endpoints of 2 ranks in this process (CMA between them reads this very
// process), with or without CMA.
func shmJob(noCMA bool) devicetest.Job {
	const nodes, rpn, limit = 3, 2, 512 << 10
	eager, cells := eagerCMA, DefaultRingCells // rings large enough for 32 KiB messages
	if noCMA {
		eager = eagerRings
	}
	var eps sync.Map
	grant := min(max(limit/(nodes-1)/(eager+72), 8), 256)
	return devicetest.Job{
		Nodes: nodes, RanksPerNode: rpn, EagerMax: eager, HeldBound: int64(grant * eager),
		Open: func(t testing.TB, node int) device.Transport {
			ep, err := Provider{Opts: Options{NoCMA: noCMA, RingCells: cells, ConnectTimeout: 10 * time.Second}}.Open(
				rdma.EndpointConfig{Node: node, Nodes: nodes, Secret: testSecret})
			if err != nil {
				t.Fatal(err)
			}
			d, err := rdma.New(ep, rdma.Config{Node: node, Nodes: nodes, Ranks: nodes * rpn, NodeOf: func(r int) int { return r / rpn },
				UnexpectedLimit: limit, SplitMin: 64 << 10})
			if err != nil {
				t.Fatal(err)
			}
			eps.Store(d, ep)
			return d
		},
		Kill: func(t testing.TB, node int, tr device.Transport) {
			v, _ := eps.Load(tr)
			v.(*endpoint).kill()
		},
	}
}

func TestConformanceSHM(t *testing.T) {
	t.Run("cma", func(t *testing.T) { devicetest.Run(t, shmJob(false)) })
	t.Run("rings", func(t *testing.T) { devicetest.Run(t, shmJob(true)) })
}

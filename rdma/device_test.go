package rdma_test

import (
	"sync"
	"testing"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/device/devicetest"
	"github.com/gompj/gompj/rdma"
	"github.com/gompj/gompj/rdma/memprov"
)

var (
	_ device.Transport = (*rdma.Device)(nil)
	_ device.Poller    = (*rdma.Device)(nil)
	_ device.Registrar = (*rdma.Device)(nil)
	_ device.Segmented = (*rdma.Device)(nil)
)

// memJob is a conformance job of 3 nodes of 2 ranks over an in-memory fabric; tune adjusts the devices' Config.
func memJob(t *testing.T, o memprov.Options, tune ...func(*rdma.Config)) devicetest.Job {
	const nodes, rpn, eager, limit = 3, 2, 4 << 10, 512 << 10
	var eps sync.Map // *rdma.Device -> rdma.Endpoint
	var mu sync.Mutex
	var f *memprov.Fabric
	fabric := func(node int) *memprov.Fabric {
		mu.Lock()
		defer mu.Unlock()
		if node == 0 || f == nil {
			f = memprov.New(o) // a fresh fabric per job: node 0 opens first
		}
		return f
	}
	// Each node grants limit/(nodes-1)/buffer credits, between 8 and 256; a receiver holds at most that many.
	grant := min(max(limit/(nodes-1)/(eager+72), 8), 256)
	return devicetest.Job{
		Nodes: nodes, RanksPerNode: rpn, EagerMax: eager, HeldBound: int64(grant * eager),
		Open: func(t testing.TB, node int) device.Transport {
			fb := fabric(node)
			ep, err := fb.Open(rdma.EndpointConfig{Node: node, Nodes: nodes})
			if err != nil {
				t.Fatal(err)
			}
			cfg := rdma.Config{Node: node, Nodes: nodes, Ranks: nodes * rpn, NodeOf: func(r int) int { return r / rpn },
				EagerLimit: eager, UnexpectedLimit: limit, SplitMin: 64 << 10}
			for _, f := range tune {
				f(&cfg)
			}
			d, err := rdma.New(ep, cfg)
			if err != nil {
				t.Fatal(err)
			}
			eps.Store(d, struct {
				f  *memprov.Fabric
				ep rdma.Endpoint
			}{fb, ep})
			return d
		},
		Kill: func(t testing.TB, node int, tr device.Transport) {
			v, _ := eps.Load(tr)
			x := v.(struct {
				f  *memprov.Fabric
				ep rdma.Endpoint
			})
			x.f.Kill(x.ep)
		},
	}
}

// TestConformanceMem runs the device conformance suite over in-memory fabrics that behave as the providers may:
// ordered or not, completions delayed and reordered, RMA or none (DATA streamed), RMA split between both ends,
// registered local buffers and virtual addresses, small RMA limits, vectored Reads, a busy provider, a tiny
// registration cache.
func TestConformanceMem(t *testing.T) {
	cases := []struct {
		name string
		o    memprov.Options
		tune func(*rdma.Config)
	}{
		{"ordered-rma", memprov.Options{Seed: 1, Ordered: true, RMA: true, InjectSize: 8 << 10}, nil},
		{"unordered-delayed-split", memprov.Options{Seed: 2, Delay: 3, RMA: true, SplitCopy: true, VirtAddr: true}, nil},
		{"no-rma", memprov.Options{Seed: 3, Delay: 2, InjectSize: 100}, nil},
		{"localmr-maxrma-busy", memprov.Options{Seed: 4, Ordered: true, RMA: true, LocalMR: true, MaxRMA: 100 << 10,
			SplitCopy: true, QueueLimit: 4, InjectSize: 64}, nil},
		{"rma-refused-one-way", memprov.Options{Seed: 5, Delay: 1, RMA: true, NoRMA: func(a, b int) bool { return a == 1 }}, nil},
		{"readv-maxrma", memprov.Options{Seed: 7, Delay: 2, RMA: true, Readv: true, MaxRMA: 100 << 10, VirtAddr: true}, nil},
		// A registration cache of one entry and one byte: every registration is evicted as soon as its transfer
		// lets go of it, under many transfers in flight at once. memprov fails a Read or Write under a closed key,
		// so one evicted while in use would fail its transfer.
		{"regcache-pressure", memprov.Options{Seed: 6, Delay: 2, RMA: true, SplitCopy: true},
			func(c *rdma.Config) { c.RegCache, c.RegCacheBytes = 1, 1 }},
	}
	for i, c := range cases {
		if testing.Short() && (i%2 == 0 || c.tune != nil) {
			continue // -short (the race detector's run): the unordered split and the busy fabrics are enough
		}
		var tune []func(*rdma.Config)
		if c.tune != nil {
			tune = append(tune, c.tune)
		}
		t.Run(c.name, func(t *testing.T) { devicetest.Run(t, memJob(t, c.o, tune...)) })
	}
}

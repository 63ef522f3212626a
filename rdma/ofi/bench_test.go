//go:build ofi

package ofi

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/rdma"
)

// pingSink counts deliveries and clears every RTS into its buffer.
type pingSink struct {
	d   *rdma.Device
	buf []byte
	got atomic.Int64
}

func (s *pingSink) DeliverEager(in *device.Inbound) { in.Done(); s.got.Add(1) }
func (s *pingSink) DeliverRTS(h *device.Header) {
	if err := s.d.ClearToSend(h, s.buf[:h.Length], s); err != nil {
		panic(err)
	}
}
func (s *pingSink) PeerLost(node int, err error) { panic(fmt.Sprint("lost ", node, err)) }
func (s *pingSink) Complete(err error) {
	if err != nil {
		panic(err)
	}
	s.got.Add(1)
}

type doneFlag struct{ n atomic.Int64 }

func (d *doneFlag) Complete(error) { d.n.Add(1) }

// pair is two rdma devices of this process over this provider, each driven by the goroutine that polls it.
func devicePair(tb testing.TB, fc fabricCase, size int) ([2]*rdma.Device, [2]*pingSink) {
	var devs [2]*rdma.Device
	var sinks [2]*pingSink
	addrs := make([][]byte, 2)
	for i := range 2 {
		ep, err := New(Options{Provider: fc.prov, API: fc.api}).Open(rdma.EndpointConfig{Node: i, Nodes: 2, Secret: []byte("bench")})
		if err != nil {
			tb.Fatal(err)
		}
		d, err := rdma.New(ep, rdma.Config{Node: i, Nodes: 2, Ranks: 2, NodeOf: func(r int) int { return r }})
		if err != nil {
			tb.Fatal(err)
		}
		devs[i], sinks[i], addrs[i] = d, &pingSink{d: d, buf: make([]byte, size)}, d.Address()
	}
	for i, d := range devs {
		mine := [][]byte{addrs[0], addrs[1]}
		mine[i] = nil
		if err := d.Start(sinks[i], mine); err != nil {
			tb.Fatal(err)
		}
	}
	for _, d := range devs {
		if err := d.WaitConnected(20 * time.Second); err != nil {
			tb.Fatal(err)
		}
	}
	tb.Cleanup(func() {
		done := make(chan struct{}, 2)
		for _, d := range devs {
			go func() { d.Close(); done <- struct{}{} }()
		}
		<-done
		<-done
	})
	return devs, sinks
}

// BenchmarkPingPong is the half round trip between two rdma devices of this process over libfabric's tcp
// provider (loopback), each driven by its own goroutine polling it; the rank layer is not involved:
//
//	go test -tags ofi -run X -bench PingPong ./rdma/ofi
func BenchmarkPingPong(b *testing.B) {
	for _, size := range []int{0, 8, 1 << 10, 64 << 10, 1 << 20, 4 << 20} {
		b.Run(fmt.Sprint(size), func(b *testing.B) { pingPong(b, fabricCase{"tcp;ofi_rxm", ""}, size) })
	}
}

func pingPong(b *testing.B, fc fabricCase, size int) {
	devs, sinks := devicePair(b, fc, size)
	payload := make([]byte, size)
	send := func(i int, done *doneFlag) {
		d := devs[i]
		h := &device.Header{Kind: device.KindEager, Type: 1, Source: int32(i), Dest: int32(1 - i), SrcRank: int32(i)}
		if lim := d.EagerLimit(1 - i); lim > 0 && size <= lim {
			if err := d.SendEager(h, payload, nil); err != nil {
				panic(err)
			}
			return
		}
		h.Kind, h.Length = device.KindRTS, uint64(size)
		if err := d.SendRendezvous(h, payload, done); err != nil {
			panic(err)
		}
	}
	wait := func(i int, n int64, done *doneFlag, sends int64) {
		for sinks[i].got.Load() < n || done.n.Load() < sends {
			devs[i].Poll()
		}
	}
	iters := b.N + 20
	echo := make(chan struct{})
	var sent1 doneFlag
	go func() {
		defer close(echo)
		devs[1].Enter()
		defer devs[1].Leave(true)
		for k := range iters {
			wait(1, int64(k+1), &sent1, 0)
			send(1, &sent1)
		}
		wait(1, int64(iters), &sent1, sent1.n.Load())
	}()
	var sent0 doneFlag
	devs[0].Enter()
	for k := range iters {
		if k == 20 {
			b.ResetTimer()
		}
		send(0, &sent0)
		wait(0, int64(k+1), &sent0, 0)
	}
	b.StopTimer()
	devs[0].Leave(true)
	<-echo
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N)/1000, "us/half-rt")
	if size > 0 {
		b.SetBytes(int64(2 * size))
	}
}

// TestEagerAllocs: an eager message, sent, polled in, delivered and released, allocates nothing at steady state,
// in the device and this provider together (inject for the empty message, a bounce buffer and its completion
// for 1 KiB).
func TestEagerAllocs(t *testing.T) {
	for _, size := range []int{0, 1 << 10} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			devs, sinks := devicePair(t, fabricCase{"tcp;ofi_rxm", ""}, 0)
			payload := make([]byte, size)
			h := &device.Header{Kind: device.KindEager, Type: 1, Source: 0, Dest: 1, SrcRank: 0}
			devs[0].Enter()
			devs[1].Enter()
			defer devs[0].Leave(true)
			defer devs[1].Leave(true)
			one := func() {
				want := sinks[1].got.Load() + 1
				if err := devs[0].SendEager(h, payload, nil); err != nil {
					t.Fatal(err)
				}
				for sinks[1].got.Load() < want {
					devs[1].Poll()
					devs[0].Poll() // send completions and returned credits
				}
			}
			for range 200 {
				one()
			}
			if n := testing.AllocsPerRun(500, one); n > 0 {
				t.Fatalf("%v allocations per eager message of %d bytes", n, size)
			}
		})
	}
}

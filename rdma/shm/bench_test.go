//go:build linux

package shm

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/device/devicetest"
	"github.com/gompj/gompj/queues"
	"github.com/gompj/gompj/ranks"
	"github.com/gompj/gompj/rdma"
)

// pingSink counts deliveries and clears every RTS into its buffer (atomic: a test may change it between messages,
// while the device's goroutine reads it).
type pingSink struct {
	d   *rdma.Device
	buf atomic.Pointer[[]byte]
	got atomic.Int64
}

func (s *pingSink) DeliverEager(in *device.Inbound) { in.Done(); s.got.Add(1) }
func (s *pingSink) DeliverRTS(h *device.Header) {
	if err := s.d.ClearToSend(h, (*s.buf.Load())[:h.Length], s); err != nil {
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

// BenchmarkPingPong is the half round trip between two shm devices of this process, each driven by its own
// goroutine polling it (the rank layer is not involved): go test -run X -bench PingPong ./rdma/shm
func BenchmarkPingPong(b *testing.B) {
	for _, cma := range []bool{true, false} {
		for _, size := range []int{0, 8, 1 << 10, 64 << 10, 1 << 20} {
			b.Run(fmt.Sprintf("cma=%v/%d", cma, size), func(b *testing.B) { pingPong(b, !cma, size) })
		}
	}
}

// connectPing connects a pair of devices, each with a pingSink clearing RTSs into a buffer of size bytes.
func connectPing(t testing.TB, devs [2]*rdma.Device, size int) [2]*pingSink {
	var sinks [2]*pingSink
	for i, d := range devs {
		sinks[i] = &pingSink{d: d}
		buf := make([]byte, size)
		sinks[i].buf.Store(&buf)
	}
	devicetest.Connect(t, []device.Transport{devs[0], devs[1]}, []device.Sink{sinks[0], sinks[1]}, 10*time.Second)
	return sinks
}

func pingPong(b *testing.B, noCMA bool, size int) {
	devs, _ := devicePair(b, Options{NoCMA: noCMA})
	sinks := connectPing(b, devs, size)
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
	// wait polls device i until its sink has seen n messages and its rendezvous sends completed.
	wait := func(i int, n int64, done *doneFlag, sends int64) {
		d := devs[i]
		for sinks[i].got.Load() < n || done.n.Load() < sends {
			d.Poll()
		}
	}
	iters := b.N + 100
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
		if k == 100 {
			b.ResetTimer()
		}
		send(0, &sent0)
		wait(0, int64(k+1), &sent0, 0)
	}
	b.StopTimer()
	devs[0].Leave(true)
	<-echo
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N)/1000, "us/half-rt")
}

// TestEagerAllocs: an eager message, sent, polled in, delivered and released, allocates nothing at steady state.
func TestEagerAllocs(t *testing.T) {
	var devs [2]*rdma.Device
	var sinks [2]*pingSink
	for i := range 2 {
		ep, err := Provider{}.Open(rdma.EndpointConfig{Node: i, Nodes: 2, Secret: testSecret})
		if err != nil {
			t.Fatal(err)
		}
		d, err := rdma.New(ep, rdma.Config{Node: i, Nodes: 2, Ranks: 2, NodeOf: func(r int) int { return r }})
		if err != nil {
			t.Fatal(err)
		}
		devs[i], sinks[i] = d, &pingSink{d: d}
	}
	devicetest.Connect(t, []device.Transport{devs[0], devs[1]}, []device.Sink{sinks[0], sinks[1]}, 10*time.Second)
	payload := make([]byte, 100)
	h := &device.Header{Kind: device.KindEager, Type: 1, Source: 0, Dest: 1}
	devs[1].Enter()
	defer devs[1].Leave(true)
	// Both loops poll both devices. Node 1's progress goroutine stands down while this goroutine has entered it
	// (device.Poller), so a credit message node 1 could not hand to its ring at once waits for a poll of node 1;
	// polling node 0 alone for that credit could spin for ever. A deadline turns any other stall into a failure
	// that says what it waited for, rather than the package's timeout.
	deadline := time.Now().Add(time.Minute)
	spin := func(what string, done func() bool) {
		for i := 0; !done(); i++ {
			devs[0].Poll()
			devs[1].Poll()
			if i%4096 == 0 && time.Now().After(deadline) {
				t.Fatalf("stalled waiting for %s: eager limit toward node 1 %d, %d delivered", what,
					devs[0].EagerLimit(1), sinks[1].got.Load())
			}
		}
	}
	round := func() {
		n := sinks[1].got.Load()
		// Credit comes back in a message node 0 must poll.
		spin("credit", func() bool { return devs[0].EagerLimit(1) >= len(payload) })
		if err := devs[0].SendEager(h, payload, nil); err != nil {
			t.Fatal(err)
		}
		spin("delivery", func() bool { return sinks[1].got.Load() != n })
	}
	for range 1000 { // past the first credit returns
		round()
	}
	if a := testing.AllocsPerRun(1000, round); a != 0 {
		t.Fatalf("%v allocations per eager message", a)
	}
}

// rankPair starts two worlds of one rank each over a pair of shm devices, as two node processes of one host, each
// device routed as a node routes it, and returns their ranks' communicators.
func rankPair(t testing.TB) (c0, c1 *ranks.Comm) {
	devs, _ := devicePair(t, Options{})
	var worlds [2]*ranks.World
	var sinks [2]device.Sink
	var trs [2]device.Transport
	for i := range 2 {
		byNode := make([]device.Device, 2)
		byNode[1-i] = devs[i]
		r, err := device.NewRouter(func(r int) int { return r }, byNode, nil)
		if err != nil {
			t.Fatal(err)
		}
		w, err := ranks.NewWorld(ranks.Options{Size: 2, Lo: i, Hi: i + 1, EagerLimit: 64 << 10,
			Policy: queues.DefaultPolicy(1), Device: r, NodeOf: func(r int) int { return r }})
		if err != nil {
			t.Fatal(err)
		}
		worlds[i], sinks[i], trs[i] = w, w, devs[i]
	}
	devicetest.Connect(t, trs[:], sinks[:], 10*time.Second)
	return worlds[0].Comm(0), worlds[1].Comm(1)
}

// echo answers n messages from rank 0 on c, each sent back as received into buf; the channel says how it ended.
func echo(c *ranks.Comm, buf any, n int) <-chan error {
	done := make(chan error, 1)
	go func() {
		for range n {
			if _, err := c.Recv(buf, 0, 0); err != nil {
				done <- err
				return
			}
			if err := c.Send(buf, 0, 0); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	return done
}

// TestRankPingPongAllocs: a round trip of small messages between the ranks of two worlds over shm devices, each
// received into a receive posted first (claimed where it lies in the ring), allocates nothing at steady state, on
// either side.
func TestRankPingPongAllocs(t *testing.T) {
	c0, c1 := rankPair(t)
	var b0, b1 any = make([]float64, 4), make([]float64, 4)
	const rounds = 200
	echoed := echo(c1, b1, rounds+1) // AllocsPerRun runs the round once more, first
	var err error
	allocs := testing.AllocsPerRun(rounds, func() {
		if err == nil {
			err = c0.Send(b0, 1, 0)
		}
		if err == nil {
			_, err = c0.Recv(b0, 1, 0)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-echoed; err != nil {
		t.Fatal(err)
	}
	if allocs != 0 {
		t.Fatalf("%v allocations per round trip", allocs)
	}
}

// BenchmarkRankPingPong0B is BenchmarkPingPong's 0-byte case through the whole stack: two worlds of one rank each,
// as two node processes of one host, over the pair of devices (routed as a node routes them), their ranks calling
// Send and Recv. One op is a half round trip: go test -run X -bench RankPingPong ./rdma/shm
func BenchmarkRankPingPong0B(b *testing.B) {
	c0, c1 := rankPair(b)
	var buf any = []byte{}
	iters := b.N + 1000
	echoed := echo(c1, buf, iters)
	for k := range iters {
		if k == 1000 {
			b.ResetTimer()
		}
		if err := c0.Send(buf, 1, 0); err != nil {
			b.Fatal(err)
		}
		if _, err := c0.Recv(buf, 1, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := <-echoed; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N)/1000, "us/half-rt")
}

// BenchmarkRankRoundTripDriven is BenchmarkRankPingPong0B with one goroutine doing the work of both ranks: each
// sends, and the other receives what is already in its ring. No rank ever spins or parks, so an op is the
// instructions of two messages' paths through the whole stack and nothing else: with a fixed count, for callgrind
// (20000x and 40000x differenced, GOMAXPROCS=1 GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off):
// go test -c ./rdma/shm && ./shm.test -test.run X -test.bench RankRoundTripDriven -test.benchtime 20000x
func BenchmarkRankRoundTripDriven(b *testing.B) {
	c0, c1 := rankPair(b)
	var buf any = []byte{}
	for b.Loop() {
		if err := c0.Send(buf, 1, 0); err != nil {
			b.Fatal(err)
		}
		if _, err := c1.Recv(buf, 0, 0); err != nil {
			b.Fatal(err)
		}
		if err := c1.Send(buf, 0, 0); err != nil {
			b.Fatal(err)
		}
		if _, err := c0.Recv(buf, 1, 0); err != nil {
			b.Fatal(err)
		}
	}
}

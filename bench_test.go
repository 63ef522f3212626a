package gompj_test

import (
	"testing"
	"time"

	"github.com/gompj/gompj"
)

// BenchmarkLatency0B is osu_latency's 0-byte case: one op is one half round trip between two ranks.
func BenchmarkLatency0B(b *testing.B) {
	err := gompj.RunWith(gompj.Config{Ranks: 2}, func(c *gompj.Comm) error {
		buf := []byte{}
		if c.Rank() == 0 {
			b.ResetTimer()
		}
		for i := 0; i < (b.N+1)/2; i++ {
			if c.Rank() == 0 {
				if err := c.Send(buf, 1, 0); err != nil {
					return err
				}
				if _, err := c.Recv(buf, 1, 0); err != nil {
					return err
				}
			} else {
				if _, err := c.Recv(buf, 0, 0); err != nil {
					return err
				}
				if err := c.Send(buf, 0, 0); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkBandwidth1MiB is osu_bw's pattern at 1 MiB: a window of 64 Isends of one buffer, then an ack.
func BenchmarkBandwidth1MiB(b *testing.B) { bandwidth(b, 1<<20) }

// bandwidth runs osu_bw's pattern with messages of size bytes: rank 0 posts a window of 64 Isends of one buffer,
// rank 1 a window of Irecvs, then rank 1 acknowledges.
func bandwidth(b *testing.B, size int) {
	const window = 64
	err := gompj.RunWith(gompj.Config{Ranks: 2}, func(c *gompj.Comm) error {
		buf := make([]byte, size+4096)[:size] // past the small size classes: the two ranks' buffers share no line
		for i := range buf {
			buf[i] = 'a' // written: an untouched buffer reads as the zero page, in cache whatever its size
		}
		ack := make([]byte, 4096)[:4]
		reqs := make([]*gompj.Request, window)
		if c.Rank() == 0 {
			b.SetBytes(int64(size * window))
			b.ResetTimer()
		}
		for i := 0; i < b.N; i++ {
			var err error
			for j := range reqs {
				if c.Rank() == 0 {
					reqs[j], err = c.Isend(buf, 1, 0)
				} else {
					reqs[j], err = c.Irecv(buf, 0, 0)
				}
				if err != nil {
					return err
				}
			}
			if err := gompj.Waitall(reqs...); err != nil {
				return err
			}
			if c.Rank() == 0 {
				_, err = c.Recv(ack, 1, 1)
			} else {
				err = c.Send(ack, 0, 1)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRing10000Ranks starts 10,000 ranks, passes a token once round the ring, and finishes: one op is the
// whole job.
func BenchmarkRing10000Ranks(b *testing.B) {
	const np = 10000
	for i := 0; i < b.N; i++ {
		err := gompj.RunWith(gompj.Config{Ranks: np}, func(c *gompj.Comm) error {
			tok := []int64{0}
			next, prev := (c.Rank()+1)%np, (c.Rank()+np-1)%np
			if c.Rank() == 0 {
				if err := c.Send(tok, next, 0); err != nil {
					return err
				}
				_, err := c.Recv(tok, prev, 0)
				return err
			}
			if _, err := c.Recv(tok, prev, 0); err != nil {
				return err
			}
			tok[0]++
			return c.Send(tok, next, 0)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBlockedRecvCPU puts 63 of 64 ranks in a Recv that is not satisfied for a while and reports the CPU
// they cost after the spin window, as a percentage of one core per blocked rank ("core%/rank").
func BenchmarkBlockedRecvCPU(b *testing.B) {
	const np = 64
	var frac float64
	for i := 0; i < b.N; i++ {
		err := gompj.RunWith(gompj.Config{Ranks: np}, func(c *gompj.Comm) error {
			if c.Rank() != 0 {
				_, err := c.Recv(make([]byte, 1), 0, 0)
				return err
			}
			time.Sleep(20 * time.Millisecond) // past every rank's spin window: not synchronisation, a measurement
			t0, w0 := cpuTime(), time.Now()
			time.Sleep(200 * time.Millisecond)
			frac = float64(cpuTime()-t0) / float64(time.Since(w0)) / (np - 1)
			for d := 1; d < np; d++ {
				if err := c.Send([]byte{1}, d, 0); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(frac*100, "core%/rank")
}

// BenchmarkBandwidth8B is osu_bw's pattern at 8 bytes: the small-message rate, where the costs per message (matching,
// requests, the receiver's lock) rather than copying set the figure.
func BenchmarkBandwidth8B(b *testing.B) { bandwidth(b, 8) }

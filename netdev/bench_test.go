//go:build linux

package netdev

import (
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gompj/gompj/device"
)

// BenchmarkPingPong0B: an empty eager message bounces between two devices in this process over loopback; each
// sink answers from its progress loop. One op is one half round trip.
func BenchmarkPingPong0B(b *testing.B) {
	c := startCluster(b, 2, 1, nil)
	d0, d1 := c.devs[0], c.devs[1]
	ping := &device.Header{Source: 0, Dest: 1}
	pong := &device.Header{Source: 1, Dest: 0}
	finished := make(chan struct{})
	var left int
	c.sinks[1].mu.Lock()
	c.sinks[1].onEager = func(in *device.Inbound) bool {
		in.Done()
		if err := d1.SendEager(pong, nil, nil); err != nil {
			b.Error(err)
		}
		return true
	}
	c.sinks[1].mu.Unlock()
	c.sinks[0].mu.Lock()
	c.sinks[0].onEager = func(in *device.Inbound) bool {
		in.Done()
		left--
		if left <= 0 {
			finished <- struct{}{}
			return true
		}
		if err := d0.SendEager(ping, nil, nil); err != nil {
			b.Error(err)
		}
		return true
	}
	c.sinks[0].mu.Unlock()
	run := func(rounds int) time.Duration {
		left = rounds
		start := time.Now()
		if err := d0.SendEager(ping, nil, nil); err != nil {
			b.Fatal(err)
		}
		<-finished
		return time.Since(start)
	}
	run(1000) // warm up
	rounds := max(b.N/2, 1)
	b.ResetTimer()
	el := run(rounds)
	b.StopTimer()
	b.ReportMetric(float64(el.Nanoseconds())/float64(2*rounds)/1000, "µs/half-rtt")
}

// BenchmarkBandwidth4MiB streams 4 MiB rendezvous messages from node 0 to node 1 with up to 8 in flight (the
// receiver clears each RTS at once, into one of 8 buffers).
func BenchmarkBandwidth4MiB(b *testing.B) {
	const size = 4 << 20
	const window = 8
	c := startCluster(b, 2, 1, nil)
	d0, d1 := c.devs[0], c.devs[1]
	var bufs [window][]byte
	for i := range bufs {
		bufs[i] = make([]byte, size)
	}
	recvd := make(chan struct{}, window)
	c.sinks[1].mu.Lock()
	c.sinks[1].onRTS = func(h *device.Header) bool {
		if err := d1.ClearToSend(h, bufs[h.Tag%window], completerFunc(func(err error) {
			if err != nil {
				b.Error(err)
			}
			recvd <- struct{}{}
		})); err != nil {
			b.Error(err)
		}
		return true
	}
	c.sinks[1].mu.Unlock()
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(i)
	}
	credits := window
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if credits == 0 {
			<-recvd
			credits++
		}
		credits--
		h := &device.Header{Source: 0, Dest: 1, Tag: int32(i % window)}
		if err := d0.SendRendezvous(h, payload, nil); err != nil {
			b.Fatal(err)
		}
	}
	for credits < window {
		<-recvd
		credits++
	}
	b.StopTimer()
}

// BenchmarkLoopbackFloor is the floor BenchmarkPingPong0B and `gompj bench latency -nodes 2` are measured against:
// two goroutines bounce one frame header (48 bytes) over a TCP loopback connection with TCP_NODELAY, each
// busy-polling a non-blocking read and writing with one system call, as the C busy-poll ping-pong does
// (anchors/tcppp.c). One op is one half round trip. What gompj adds to it is framing, matching and completion.
func BenchmarkLoopbackFloor(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			b.Error(err)
		}
		accepted <- nc
	}()
	dialed, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	fa, err := detach(dialed, CongestionSystem)
	if err != nil {
		b.Fatal(err)
	}
	fb, err := detach(<-accepted, CongestionSystem)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fa)
	defer unix.Close(fb)
	bounce := func(fd int, first bool, rounds int) error {
		var buf [HeaderSize]byte
		for i := 0; i < rounds; i++ {
			if !first || i > 0 {
				for got := 0; got < HeaderSize; {
					n, err := readFd(fd, buf[got:])
					if err != nil && err != unix.EAGAIN {
						return err
					}
					got += n
				}
			}
			if _, err := unix.Write(fd, buf[:]); err != nil {
				return err
			}
		}
		return nil
	}
	rounds := max(b.N/2, 1)
	done := make(chan error, 1)
	b.ResetTimer()
	go func() { done <- bounce(fb, false, rounds) }()
	if err := bounce(fa, true, rounds); err != nil {
		b.Fatal(err)
	}
	for got := 0; got < HeaderSize; { // the last answer
		var buf [HeaderSize]byte
		n, err := readFd(fa, buf[got:])
		if err != nil && err != unix.EAGAIN {
			b.Fatal(err)
		}
		got += n
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*rounds)/1000, "µs/half-rtt")
}

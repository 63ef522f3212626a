//go:build linux

package netdev

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gompj/gompj/device"
)

// claimed is one message a test sink claimed at its header.
type claimed struct {
	h   device.Header
	buf []byte
	err chan error
}

func (c *claimed) Complete(err error) { c.err <- err }

// TestClaimEager: the receiving sink claims every message whose tag is even at its header (device.EagerClaimer),
// and the device reads those payloads straight into the claimed buffers (sizes from empty to the eager limit, so
// that large ones are read past the read buffer); odd tags are delivered as before. Claims and deliveries together keep the per-pair order; every claim completes once, with
// its payload; a synchronous message claimed is acknowledged by the sink's Ack; and the credit of claimed messages
// comes back, though they send the receiver's grant over many times.
func TestClaimEager(t *testing.T) {
	const eager, grant, n = 64 << 10, 256 << 10, 300
	c := startCluster(t, 2, 1, func(i int, cfg *Config) {
		cfg.EagerLimit = eager
		cfg.UnexpectedLimit = grant
	})
	d0, d1, s1 := c.devs[0], c.devs[1], c.sinks[1]
	size := func(i int) int { return []int{1, 8, 100, 4 << 10, 20 << 10, eager, 0}[i%7] }
	var mu sync.Mutex
	var order []string
	var claims []*claimed
	s1.mu.Lock()
	s1.onClaim = func(h *device.Header) (device.Payload, device.Completer, bool) {
		if h.Tag%2 != 0 {
			return device.Payload{}, nil, false
		}
		cl := &claimed{h: *h, buf: make([]byte, h.Length), err: make(chan error, 2)}
		if h.Flags&device.FlagSync != 0 {
			if err := d1.Ack(h); err != nil {
				t.Error(err)
			}
		}
		mu.Lock()
		order = append(order, fmt.Sprint("claim ", h.Tag))
		claims = append(claims, cl)
		mu.Unlock()
		return device.Contiguous(cl.buf), cl, true
	}
	s1.onEager = func(in *device.Inbound) bool {
		mu.Lock()
		order = append(order, fmt.Sprint("deliver ", in.Header.Tag))
		mu.Unlock()
		return false
	}
	s1.mu.Unlock()

	var syncDone completer
	for i := range n {
		deadline := time.Now().Add(waitLong)
		for d0.EagerLimit(1) < size(i) {
			if time.Now().After(deadline) {
				t.Fatalf("message %d: the credit toward the receiver never came back", i)
			}
			// The credit of claimed messages comes back with no Inbound released; delivered ones are released
			// below.
			s1.mu.Lock()
			held := s1.eager
			s1.eager = nil
			s1.mu.Unlock()
			for _, in := range held {
				in.Done()
			}
			time.Sleep(100 * time.Microsecond)
		}
		h := eagerHeader(0, 1, int32(i))
		var done device.Completer
		if i == 100 {
			h.Flags = device.FlagSync
			syncDone = newCompleter()
			done = syncDone
		}
		if err := d0.SendEager(h, payloadFor(0, 1, i, size(i)), done); err != nil {
			t.Fatal(err)
		}
	}
	if err := syncDone.wait(t, waitLong, "the claimed synchronous send"); err != nil {
		t.Fatal(err)
	}
	s1.wait(t, waitLong, "every claim and delivery", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == n
	})
	mu.Lock()
	defer mu.Unlock()
	for i, ev := range order {
		want := fmt.Sprint("claim ", i)
		if i%2 != 0 {
			want = fmt.Sprint("deliver ", i)
		}
		if ev != want {
			t.Fatalf("event %d is %q, want %q", i, ev, want)
		}
	}
	for _, cl := range claims {
		i := int(cl.h.Tag)
		select {
		case err := <-cl.err:
			if err != nil {
				t.Fatalf("claim %d completed with %v", i, err)
			}
		case <-time.After(waitLong):
			t.Fatalf("claim %d never completed", i)
		}
		if len(cl.err) != 0 {
			t.Fatalf("claim %d completed twice", i)
		}
		if !bytes.Equal(cl.buf, payloadFor(0, 1, i, size(i))) {
			t.Fatalf("claim %d: payload differs", i)
		}
	}
	s1.mu.Lock()
	for _, in := range s1.eager {
		in.Done()
	}
	s1.eager = nil
	s1.mu.Unlock()
	waitUntil(t, waitLong, "the whole grant back", func() bool { return d0.peers[1].credit.Load() == grant })
}

// TestClaimEagerPeerLost: a peer that dies in the middle of a claimed payload completes the claim with the loss.
func TestClaimEagerPeerLost(t *testing.T) {
	d, s := oneDevice(t, nil)
	got := make(chan *claimed, 1)
	s.mu.Lock()
	s.onClaim = func(h *device.Header) (device.Payload, device.Completer, bool) {
		cl := &claimed{h: *h, buf: make([]byte, h.Length), err: make(chan error, 2)}
		got <- cl
		return device.Contiguous(cl.buf), cl, true
	}
	s.mu.Unlock()
	nc := impostor(t, d)
	nc.Write(append(rawHeader(device.Header{Kind: device.KindEager, Source: 2, Dest: 1, Length: 100, Type: 1}, 0),
		make([]byte, 10)...))
	var cl *claimed
	select {
	case cl = <-got:
	case <-time.After(waitLong):
		t.Fatal("the message was not offered for a claim")
	}
	nc.Close()
	select {
	case err := <-cl.err:
		if !errors.Is(err, ErrPeerLost) {
			t.Fatalf("claim completed with %v, want ErrPeerLost", err)
		}
	case <-time.After(waitLong):
		t.Fatal("the claim of a payload that will never come was not completed")
	}
	s.wait(t, waitLong, "PeerLost", func() bool { return len(s.lost) == 1 })
}

package devicetest

import (
	"bytes"
	"math/rand"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gompj/gompj/device"
)

// Truncation (device.Device, ClearToSend): a receive buffer shorter than the message gets the message's first
// bytes, nothing past its end, and both ends complete without error; what follows on the pair arrives whole and
// in order. The receiving node never holds the bytes it does not take: a huge message truncated into a few bytes
// costs no allocation of its size anywhere in the job.

func testTruncation(t *testing.T, j *Job) {
	c := start(t, j)
	src, dst := j.rank(0, 0), j.rank(1, 0)
	segs, segmented := c.trs[1].(device.Segmented)
	segmented = segmented && segs.Segments(int(src))
	type tcase struct {
		size, take int
		pieces     bool // the receive buffer is in pieces (ClearToSendv)
		sync       bool
	}
	var cases []tcase
	for _, sz := range []int{5000, 300<<10 + 7, 3 << 20} {
		for _, take := range []int{0, 1, sz / 2, sz - 1} {
			cases = append(cases, tcase{size: sz, take: take, sync: take%2 == 1})
			if segmented && take > 0 {
				cases = append(cases, tcase{size: sz, take: take, pieces: true})
			}
		}
	}
	const guard = 64
	var e errs
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := 0
	// Each truncated rendezvous (even tag) is followed by an eager message (odd tag) that must come in order and
	// whole: the truncated message was consumed, and nothing of it leaked into what follows.
	order := func(tag int) {
		mu.Lock()
		if tag != next {
			e.add("message %d arrived as number %d (out of order)", tag, next)
		}
		next++
		mu.Unlock()
	}
	small := min(j.EagerMax, 100)
	c.sinks[1].hooks(func(in *device.Inbound) bool {
		tag := int(in.Header.Tag)
		order(tag)
		if want := payload(src, dst, tag, small); !bytes.Equal(in.Payload, want) {
			e.add("eager #%d after a truncated message: %d bytes, differing from the %d sent", tag, len(in.Payload), len(want))
		}
		in.Done()
		wg.Done()
		return true
	}, func(rts *device.Header) bool {
		tag := int(rts.Tag)
		order(tag)
		if tag%2 == 1 {
			// The follow-up went by rendezvous (no eager limit): take it whole.
			buf := make([]byte, rts.Length)
			if err := c.trs[1].ClearToSend(rts, buf, completer(func(err error) {
				if want := payload(src, dst, tag, small); err != nil || !bytes.Equal(buf, want) {
					e.add("rendezvous #%d after a truncated message: %v, bytes equal %v", tag, err, bytes.Equal(buf, want))
				}
				wg.Done()
			})); err != nil {
				e.add("ClearToSend #%d: %v", tag, err)
				wg.Done()
			}
			return true
		}
		tc := cases[tag/2]
		want := payload(src, dst, tag, tc.size)[:tc.take]
		if int(rts.Length) != tc.size {
			e.add("RTS #%d of %d bytes, sent %d", tag, rts.Length, tc.size)
		}
		if tc.pieces {
			b := newBlocks(rand.New(rand.NewSource(int64(tag))), tc.take, "mixed")
			p := device.Payload{Segs: b, Len: tc.take}
			if err := segs.ClearToSendv(rts, p, completer(func(err error) {
				got := make([]byte, tc.take)
				b.gather(0, got)
				rest := make([]byte, b.total-tc.take)
				b.gather(tc.take, rest)
				switch {
				case err != nil:
					e.add("truncated rendezvous #%d (%d of %d bytes) into pieces: %v", tag, tc.take, tc.size, err)
				case !bytes.Equal(got, want):
					e.add("truncated rendezvous #%d (%d of %d bytes) into pieces: bytes differ", tag, tc.take, tc.size)
				case !b.gapsClean() || bytes.ContainsFunc(rest, func(r rune) bool { return r != 0 }):
					e.add("truncated rendezvous #%d into pieces: bytes past the buffer were written", tag)
				}
				wg.Done()
			})); err != nil {
				e.add("ClearToSendv #%d, %d of %d bytes: %v", tag, tc.take, tc.size, err)
				wg.Done()
			}
			return true
		}
		all := make([]byte, tc.take+guard)
		buf := all[:tc.take:tc.take]
		if err := c.trs[1].ClearToSend(rts, buf, completer(func(err error) {
			switch {
			case err != nil:
				e.add("truncated rendezvous #%d (%d of %d bytes): %v", tag, tc.take, tc.size, err)
			case !bytes.Equal(buf, want):
				e.add("truncated rendezvous #%d (%d of %d bytes): bytes differ", tag, tc.take, tc.size)
			case bytes.ContainsFunc(all[tc.take:], func(r rune) bool { return r != 0 }):
				e.add("truncated rendezvous #%d (%d of %d bytes): bytes past the buffer were written", tag, tc.take, tc.size)
			}
			wg.Done()
		})); err != nil {
			e.add("ClearToSend #%d, %d of %d bytes: %v", tag, tc.take, tc.size, err)
			wg.Done()
		}
		return true
	})
	for i, tc := range cases {
		tag := 2 * i
		h := header(src, dst, tag)
		h.Kind, h.Length = device.KindRTS, uint64(tc.size)
		if tc.sync {
			h.Flags |= device.FlagSync
		}
		wg.Add(2)
		if err := c.trs[0].SendRendezvous(h, payload(src, dst, tag, tc.size), completer(func(err error) {
			if err != nil {
				e.add("sender of truncated rendezvous #%d: %v", tag, err)
			}
			wg.Done()
		})); err != nil {
			t.Fatalf("SendRendezvous #%d: %v", tag, err)
		}
		wg.Add(1)
		h = header(src, dst, tag+1)
		if c.trs[0].EagerLimit(int(dst)) >= small {
			err := c.trs[0].SendEager(h, payload(src, dst, tag+1, small), nil)
			if err != nil {
				t.Fatalf("SendEager #%d: %v", tag+1, err)
			}
		} else if err := c.trs[0].SendRendezvous(&device.Header{Kind: device.KindRTS, Type: h.Type, Context: h.Context,
			Source: src, Dest: dst, SrcRank: src, Tag: h.Tag, Length: uint64(small)}, payload(src, dst, tag+1, small), nil); err != nil {
			t.Fatalf("SendRendezvous #%d: %v", tag+1, err)
		}
	}
	waitAll(t, &wg, 3*j.Timeout, &e, "not every truncated message and its follower completed")
	e.check(t)

	// A huge message into a few bytes: neither end allocates anything near its size (the sender's payload is made
	// before the count starts).
	const huge, take = 64 << 20, 16
	big := make([]byte, huge)
	copy(big, payload(src, dst, 99, 4<<10)) // what the receiver takes comes from here; the rest may stay zero
	buf := make([]byte, take)
	wg.Add(2)
	c.sinks[1].hooks(nil, func(rts *device.Header) bool {
		if err := c.trs[1].ClearToSend(rts, buf, completer(func(err error) {
			if err != nil {
				e.add("truncated %d-byte rendezvous: %v", huge, err)
			}
			wg.Done()
		})); err != nil {
			e.add("ClearToSend of the huge message: %v", err)
			wg.Done()
		}
		return true
	})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	h := header(src, dst, 1000)
	h.Kind, h.Length = device.KindRTS, huge
	if err := c.trs[0].SendRendezvous(h, big, completer(func(err error) {
		if err != nil {
			e.add("sender of the huge truncated message: %v", err)
		}
		wg.Done()
	})); err != nil {
		t.Fatal(err)
	}
	waitAll(t, &wg, j.Timeout, &e, "the huge truncated message did not complete")
	runtime.ReadMemStats(&after)
	e.check(t)
	if !bytes.Equal(buf, big[:take]) {
		t.Errorf("the huge message's first %d bytes differ", take)
	}
	if d := after.TotalAlloc - before.TotalAlloc; d > huge/8 {
		t.Errorf("a %d-byte message truncated into %d bytes allocated %d bytes", huge, take, d)
	}
	runtime.KeepAlive(big)
}

func waitAll(t *testing.T, wg *sync.WaitGroup, d time.Duration, e *errs, what string) {
	t.Helper()
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	select {
	case <-all:
	case <-time.After(d):
		e.check(t)
		t.Fatal(what)
	}
}

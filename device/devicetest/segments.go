package devicetest

import (
	"bytes"
	"fmt"
	"math/rand"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/gompj/gompj/device"
)

// The segmented-payload rules (device.Segmented), for devices that implement it: a payload in pieces arrives as the
// bytes its pieces hold, in order, whichever side is in pieces; a receive buffer in pieces gets exactly its
// pieces written, nothing between them; pieces tiny and large, more of them than device.IovMax, across the
// device's chunks, from any byte offset of the buffer (a window); order with other messages of the pair holds.

// blocks is a device.Pieces over a slice: runs at offs[i] of lens[i] bytes, pre[i] the bytes before run i.
type blocks struct {
	buf             []byte
	offs, lens, pre []int
	total           int
}

// newBlocks makes runs totalling at least n bytes: tiny ones (1 to 16 bytes), large ones (8 to 40 KiB) or a mix,
// with gaps of 1 to 9 bytes between them.
func newBlocks(rng *rand.Rand, n int, kind string) *blocks {
	b := &blocks{}
	at := 0
	for b.total < n || len(b.offs) == 0 {
		var l int
		switch {
		case kind == "tiny", kind == "mixed" && rng.Intn(2) == 0:
			l = 1 + rng.Intn(16)
		case kind == "medium": // not tiny, and more of them than one scatter-gather call takes
			l = 512 + rng.Intn(1024)
		default:
			l = 8<<10 + rng.Intn(32<<10)
		}
		at += 1 + rng.Intn(9)
		b.offs, b.lens, b.pre = append(b.offs, at), append(b.lens, l), append(b.pre, b.total)
		at += l
		b.total += l
	}
	b.buf = make([]byte, at+8)
	return b
}

func (b *blocks) Pieces(off, max int, dst [][]byte) int {
	max = min(max, b.total-off)
	n := 0
	i := sort.Search(len(b.pre), func(i int) bool { return b.pre[i] > off }) - 1
	for ; max > 0 && n < len(dst) && i < len(b.offs); i++ {
		in := off - b.pre[i]
		k := min(b.lens[i]-in, max)
		dst[n] = b.buf[b.offs[i]+in : b.offs[i]+in+k]
		n++
		off, max = off+k, max-k
	}
	return n
}

// fill writes src into the runs from byte off, gather reads them.
func (b *blocks) fill(off int, src []byte) { device.Payload{Segs: b, Len: b.total}.Scatter(off, src) }
func (b *blocks) gather(off int, dst []byte) {
	device.Payload{Segs: b, Len: b.total}.Gather(off, dst)
}

// gapsClean reports whether every byte of buf outside the runs is still zero.
func (b *blocks) gapsClean() bool {
	in := make([]bool, len(b.buf))
	for i, o := range b.offs {
		for k := range b.lens[i] {
			in[o+k] = true
		}
	}
	for i, x := range b.buf {
		if !in[i] && x != 0 {
			return false
		}
	}
	return true
}

func testSegments(t *testing.T, j *Job) {
	c := start(t, j)
	var segs []device.Segmented
	for n, tr := range c.trs {
		s, ok := tr.(device.Segmented)
		if !ok {
			if n > 0 {
				t.Fatalf("node %d's transport does not implement device.Segmented while node 0's does", n)
			}
			t.Log("the device does not implement device.Segmented: the rank layer packs views for it")
			return
		}
		segs = append(segs, s)
	}
	src, dst := j.rank(0, 0), j.rank(1, 0)
	if !segs[0].Segments(int(dst)) || !segs[1].Segments(int(src)) {
		t.Fatalf("Segments(%d) on node 0 or Segments(%d) on node 1 is false", dst, src)
	}
	rng := rand.New(rand.NewSource(5))
	type tcase struct {
		name             string
		size             int
		sendSeg, recvSeg string // "" contiguous, else a blocks kind
		eager, sync      bool
		window           bool // the payload starts inside the buffer
	}
	var cases []tcase
	for _, sz := range []int{0, 1, 100, j.EagerMax} {
		if sz <= j.EagerMax {
			cases = append(cases, tcase{name: fmt.Sprintf("eager%d", sz), size: sz, sendSeg: "tiny", eager: true},
				tcase{name: fmt.Sprintf("eager%d/large", sz), size: sz, sendSeg: "large", eager: true, sync: true, window: true})
		}
	}
	for _, sz := range []int{0, 5000, 1<<20 + 3, 3 << 20} {
		for _, k := range []struct{ s, r string }{{"tiny", ""}, {"", "tiny"}, {"tiny", "large"}, {"large", "mixed"}, {"mixed", "tiny"}, {"large", "large"}, {"medium", "medium"}, {"", "medium"}} {
			cases = append(cases, tcase{name: fmt.Sprintf("rdv%d/%s-%s", sz, k.s, k.r), size: sz, sendSeg: k.s, recvSeg: k.r, window: sz%2 == 1})
		}
	}
	var e errs
	var wg sync.WaitGroup
	type expect struct {
		want []byte
		recv string
	}
	var mu sync.Mutex
	expected := map[int]expect{} // by tag
	next := 0
	check := func(tag int) (expect, bool) {
		mu.Lock()
		defer mu.Unlock()
		x, ok := expected[tag]
		if tag != next {
			e.add("message %d arrived as number %d (out of order)", tag, next)
		}
		next++
		return x, ok
	}
	c.sinks[1].hooks(func(in *device.Inbound) bool {
		x, _ := check(int(in.Header.Tag))
		if !bytes.Equal(in.Payload, x.want) {
			e.add("eager #%d: %d bytes differ from the %d sent", in.Header.Tag, len(in.Payload), len(x.want))
		}
		if in.Header.Flags&device.FlagSync != 0 {
			if err := c.trs[1].Ack(&in.Header); err != nil {
				e.add("Ack: %v", err)
			}
		}
		in.Done()
		wg.Done()
		return true
	}, func(rts *device.Header) bool {
		tag := int(rts.Tag)
		x, _ := check(tag)
		n := int(rts.Length)
		if n != len(x.want) {
			e.add("RTS #%d of %d bytes, sent %d", tag, n, len(x.want))
		}
		if x.recv == "" {
			buf := make([]byte, n)
			if err := c.trs[1].ClearToSend(rts, buf, completer(func(err error) {
				if err != nil || !bytes.Equal(buf, x.want) {
					e.add("rendezvous #%d into a slice: %v, bytes equal %v", tag, err, bytes.Equal(buf, x.want))
				}
				wg.Done()
			})); err != nil {
				e.add("ClearToSend #%d: %v", tag, err)
				wg.Done()
			}
			return true
		}
		b := newBlocks(rand.New(rand.NewSource(int64(tag))), n+40, x.recv)
		off := 0
		if tag%2 == 1 {
			off = 13 % (b.total - n + 1) // a window
		}
		p := device.Payload{Segs: b, Off: off, Len: n}
		if err := segs[1].ClearToSendv(rts, p, completer(func(err error) {
			got := make([]byte, n)
			b.gather(off, got)
			head := make([]byte, off)
			b.gather(0, head)
			tail := make([]byte, b.total-off-n)
			b.gather(off+n, tail)
			switch {
			case err != nil:
				e.add("rendezvous #%d into pieces: %v", tag, err)
			case !bytes.Equal(got, x.want):
				e.add("rendezvous #%d into %s pieces: bytes differ", tag, x.recv)
			case !b.gapsClean() || bytes.ContainsFunc(head, func(r rune) bool { return r != 0 }) || bytes.ContainsFunc(tail, func(r rune) bool { return r != 0 }):
				e.add("rendezvous #%d into %s pieces: bytes outside the window were written", tag, x.recv)
			}
			wg.Done()
		})); err != nil {
			e.add("ClearToSendv #%d: %v", tag, err)
			wg.Done()
		}
		return true
	})
	for tag, tc := range cases {
		want := payload(src, dst, tag, tc.size)
		mu.Lock()
		expected[tag] = expect{want: want, recv: tc.recvSeg}
		mu.Unlock()
		h := header(src, dst, tag)
		var p device.Payload
		if tc.sendSeg == "" {
			p = device.Contiguous(want)
		} else {
			b := newBlocks(rng, tc.size+40, tc.sendSeg)
			off := 0
			if tc.window {
				off = 7 % (b.total - tc.size + 1)
			}
			b.fill(off, want)
			p = device.Payload{Segs: b, Off: off, Len: tc.size}
		}
		wg.Add(1) // the delivery
		var done device.Completer
		if !tc.eager || tc.sync {
			wg.Add(1)
			done = completer(func(err error) {
				if err != nil {
					e.add("%s: send: %v", tc.name, err)
				}
				wg.Done()
			})
		}
		var err error
		switch {
		case tc.eager:
			if tc.sync {
				h.Flags |= device.FlagSync
			}
			if lim := c.trs[0].EagerLimit(int(dst)); lim < tc.size {
				t.Fatalf("%s: EagerLimit %d with a fresh credit", tc.name, lim)
			}
			err = segs[0].SendEagerv(h, p, done)
		case tc.sendSeg == "":
			h.Kind, h.Length = device.KindRTS, uint64(tc.size)
			err = c.trs[0].SendRendezvous(h, want, done)
		default:
			h.Kind, h.Length = device.KindRTS, uint64(tc.size)
			err = segs[0].SendRendezvousv(h, p, done)
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
	}
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	select {
	case <-all:
	case <-time.After(3 * j.Timeout):
		e.check(t)
		t.Fatal("not every segmented message was delivered and completed")
	}
	e.check(t)
}

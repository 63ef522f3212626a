package ranks

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/gompj/gompj/device"
)

// ackDevice is a device that only records Ack (what a sink calls back while it matches); nothing here sends.
type ackDevice struct {
	mu   sync.Mutex
	acks []device.Header
}

func (d *ackDevice) SendEager(*device.Header, []byte, device.Completer) error      { return nil }
func (d *ackDevice) SendRendezvous(*device.Header, []byte, device.Completer) error { return nil }
func (d *ackDevice) ClearToSend(*device.Header, []byte, device.Completer) error    { return nil }
func (d *ackDevice) EagerLimit(int) int                                            { return 1 << 20 }
func (d *ackDevice) Close() error                                                  { return nil }
func (d *ackDevice) Ack(h *device.Header) error {
	d.mu.Lock()
	d.acks = append(d.acks, *h)
	d.mu.Unlock()
	return nil
}

// remoteEager is the header of an eager message of n int32 elements from world rank 2 (another node) to rank 0.
func remoteEager(tag int32, n int) *device.Header {
	return &device.Header{Kind: device.KindEager, Type: uint8(TypeInt32), Source: 2, Dest: 0, SrcRank: 2, Tag: tag,
		Length: uint64(4 * n)}
}

// deliver hands the rest of the usual path a message that was not claimed, as the device does once its payload
// is in.
func deliver(w *World, h *device.Header, payload []int32) {
	in := &device.Inbound{Header: *h, Payload: sliceMem(TypeInt32, payload).Bytes()}
	w.DeliverEager(in)
}

// TestClaimEager checks World.ClaimEager against the rules of matching: the receive a message claims at its header
// is the one its delivery would have matched (slot or posted queue, wildcards, posting order); what the usual path
// must report (a type error, a truncation), objects and messages with no receive are left to it; a synchronous
// message is acknowledged once; a claimed receive can no longer be cancelled; a claim that fails completes the
// receive with the failure.
func TestClaimEager(t *testing.T) {
	dev := &ackDevice{}
	w := nodeZero(t, dev, 2)
	c := w.Comm(0)
	claim := func(h *device.Header, payload []int32) (device.Completer, bool) {
		t.Helper()
		dst, done, ok := w.ClaimEager(h)
		if !ok {
			return nil, false
		}
		if dst.Size() != int(h.Length) {
			t.Fatalf("claimed buffer of %d bytes for a message of %d", dst.Size(), h.Length)
		}
		dst.Scatter(0, sliceMem(TypeInt32, payload).Bytes())
		return done, true
	}
	expect := func(r *Request, src, tag, n int, want []int32, buf []int32, wantErr error) {
		t.Helper()
		st, done, err := r.Test()
		if !done {
			t.Fatal("receive not complete")
		}
		if !errors.Is(err, wantErr) || (wantErr == nil && err != nil) {
			t.Fatalf("receive error %v, want %v", err, wantErr)
		}
		if st.Source != src || st.Tag != tag || st.Count() != n {
			t.Fatalf("status %+v, want source %d tag %d count %d", st, src, tag, n)
		}
		for i, v := range want {
			if buf[i] != v {
				t.Fatalf("element %d is %d, want %d", i, buf[i], v)
			}
		}
	}

	// The slotted receive (the only one posted) is claimed; the payload lands in its buffer.
	buf := make([]int32, 4)
	r1, _ := c.Irecv(buf, 2, 5)
	done, ok := claim(remoteEager(5, 3), []int32{7, 8, 9})
	if !ok {
		t.Fatal("a message for the slotted receive was not claimed")
	}
	if r1.s.done.Done() {
		t.Fatal("the receive completed before its payload came")
	}
	if err := r1.Cancel(); err != nil {
		t.Fatal(err)
	}
	done.Complete(nil)
	expect(r1, 2, 5, 3, []int32{7, 8, 9}, buf, nil) // Canceled would have made the count 0

	// Posting order across the wildcard and the source's bin: the earlier AnySource receive wins, then the other.
	a, b := make([]int32, 2), make([]int32, 2)
	ra, _ := c.Irecv(a, AnySource, 6)
	rb, _ := c.Irecv(b, 2, 6)
	for i, want := range []*Request{ra, rb} {
		done, ok := claim(remoteEager(6, 2), []int32{int32(i), int32(i)})
		if !ok {
			t.Fatalf("message %d was not claimed", i)
		}
		done.Complete(nil)
		if !want.s.done.Done() {
			t.Fatalf("message %d went to the wrong receive", i)
		}
	}
	expect(ra, 2, 6, 2, []int32{0, 0}, a, nil)
	expect(rb, 2, 6, 2, []int32{1, 1}, b, nil)

	// A receive that would report a type error or a truncation is left to the usual path, which reports it.
	f := make([]float64, 4)
	rf, _ := c.Irecv(f, 2, 7)
	h := remoteEager(7, 1)
	if _, ok := claim(h, []int32{1}); ok {
		t.Fatal("a receive of float64 claimed a message of int32")
	}
	deliver(w, h, []int32{1})
	if _, err := rf.Wait(); !errors.Is(err, ErrType) {
		t.Fatalf("type mismatch reported %v", err)
	}
	short := make([]int32, 1)
	rs, _ := c.Irecv(short, 2, 8)
	h = remoteEager(8, 3)
	if _, ok := claim(h, []int32{4, 5, 6}); ok {
		t.Fatal("a receive of 1 element claimed a message of 3")
	}
	deliver(w, h, []int32{4, 5, 6})
	if st, err := rs.Wait(); !errors.Is(err, ErrTruncate) || short[0] != 4 || st.Count() != 1 {
		t.Fatalf("truncation reported %v, got %v", err, short)
	}

	// No receive yet: the message becomes unexpected through DeliverEager, and a later receive takes it.
	h = remoteEager(9, 2)
	if _, ok := claim(h, []int32{1, 2}); ok {
		t.Fatal("a message with no receive posted was claimed")
	}
	deliver(w, h, []int32{1, 2})
	late := make([]int32, 2)
	rl, _ := c.Irecv(late, AnySource, 9)
	expect(rl, 2, 9, 2, []int32{1, 2}, late, nil)

	// Objects are never claimed.
	var obj struct{ A int }
	ro, _ := c.Irecv(&obj, 2, 10)
	if _, _, ok := w.ClaimEager(&device.Header{Kind: device.KindEager, Type: uint8(TypeObject), Source: 2, Dest: 0,
		SrcRank: 2, Tag: 10, Length: 8}); ok {
		t.Fatal("an object message was claimed")
	}
	if err := ro.Cancel(); err != nil {
		t.Fatal(err)
	}
	if st, _ := ro.Wait(); !st.Canceled() {
		t.Fatal("the object receive was not left posted")
	}
	// A message of no elements fits any receive, nil included, and moves nothing.
	for _, buf := range []any{nil, make([]float64, 2)} {
		r, _ := c.Irecv(buf, 2, 11)
		done, ok := claim(remoteEager(11, 0), nil)
		if !ok {
			t.Fatalf("an empty message was not claimed by a receive into %T", buf)
		}
		done.Complete(nil)
		if st, err := r.Wait(); err != nil || st.Source != 2 || st.Tag != 11 || st.Count() != 0 || st.Type() != TypeInt32 {
			t.Fatalf("empty message into %T: status %+v, error %v", buf, st, err)
		}
	}

	// A receive into a View is claimed too: the payload goes into the view's blocks, and nothing between them.
	grid := make([]int32, 12)
	v, err := Vector(grid, 3, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	rv, _ := c.Irecv(v, 2, 14)
	done, ok = claim(remoteEager(14, 2), []int32{5, 6}) // fewer elements than the view holds
	if !ok {
		t.Fatal("a message for a receive into a View was not claimed")
	}
	done.Complete(nil)
	expect(rv, 2, 14, 2, nil, nil, nil)
	if want := []int32{5, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0}; !slices.Equal(grid, want) {
		t.Fatalf("view receive left %v, want %v", grid, want)
	}

	// A synchronous message is acknowledged once, when it is claimed.
	sb := make([]int32, 1)
	rsync, _ := c.Irecv(sb, 2, 12)
	h = remoteEager(12, 1)
	h.Flags = device.FlagSync
	h.Seq = 42
	done, ok = claim(h, []int32{3})
	if !ok {
		t.Fatal("a synchronous message was not claimed")
	}
	dev.mu.Lock()
	if len(dev.acks) != 1 || dev.acks[0].Seq != 42 {
		t.Fatalf("acks %+v", dev.acks)
	}
	dev.mu.Unlock()
	done.Complete(nil)
	expect(rsync, 2, 12, 1, []int32{3}, sb, nil)

	// A claim whose payload never comes fails the receive.
	fb := make([]int32, 1)
	rfail, _ := c.Irecv(fb, AnySource, AnyTag)
	done, ok = claim(remoteEager(13, 1), []int32{0})
	if !ok {
		t.Fatal("not claimed")
	}
	done.Complete(errors.New("peer lost"))
	if _, err := rfail.Wait(); !errors.Is(err, ErrAborted) {
		t.Fatalf("failed claim reported %v", err)
	}
}

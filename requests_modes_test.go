package gompj_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/gompj/gompj"
	"github.com/gompj/gompj/internal/harness"
	"github.com/gompj/gompj/ranks"
)

// The request API of issue 11 in the three modes of internal/harness, one job per mode with every case inside it:
// persistent requests, buffered, ready and replacing sends, matched probes (from several goroutines), Cancel,
// the completion calls, empty messages, and the errors. With np 4 and 3 node processes, rank 0 and 1 share a node
// and 2 and 3 have one each: neighbours on a ring are local and remote.

// Sizes in float64 elements: in place, pooled eager, over the intra-node switch (64 KiB) and under the network's
// (128 KiB), over both.
var apiSizes = []int{1, 1000, 10000, 40000}

func TestModesRequestAPI(t *testing.T) {
	phases := []struct {
		name string
		f    func(c *gompj.Comm) error
	}{
		{"persistent", phasePersistent},
		{"buffered", phaseBuffered},
		{"ready and replace", phaseReadyReplace},
		{"matched probe", phaseMprobe},
		{"cancel", phaseCancel},
		{"completion calls", phaseCompletion},
		{"empty messages", phaseEmpty},
		{"errors", phaseErrors},
	}
	harness.Run(t, 4, func(c *gompj.Comm) error {
		for _, ph := range phases {
			if err := ph.f(c); err != nil {
				return fmt.Errorf("rank %d, %s: %w", c.Rank(), ph.name, err)
			}
			if err := c.Barrier(); err != nil {
				return err
			}
		}
		return nil
	})
}

func ring(c *gompj.Comm) (left, right int) {
	return (c.Rank() + c.Size() - 1) % c.Size(), (c.Rank() + 1) % c.Size()
}

func fillRun(b []float64, rank, run int) {
	for i := range b {
		b[i] = float64(rank*1_000_000+run*1000+i) + 0.5
	}
}

// A halo exchange on a ring with persistent requests, restarted with new data; then Free of an active receive.
func phasePersistent(c *gompj.Comm) error {
	left, right := ring(c)
	for _, n := range apiSizes {
		toL, toR, fromL, fromR := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
		var reqs []*gompj.Request
		for _, mk := range []func() (*gompj.Request, error){
			func() (*gompj.Request, error) { return c.RecvInit(fromL, left, 1) },
			func() (*gompj.Request, error) { return c.RecvInit(fromR, right, 2) },
			func() (*gompj.Request, error) { return c.SendInit(toR, right, 1) },
			func() (*gompj.Request, error) { return c.SsendInit(toL, left, 2) },
		} {
			r, err := mk()
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
		for run := 0; run < 6; run++ {
			fillRun(toL, c.Rank(), run)
			fillRun(toR, c.Rank(), run+100)
			if err := gompj.Startall(reqs...); err != nil {
				return err
			}
			if run%2 == 0 {
				if err := gompj.Waitall(reqs...); err != nil {
					return err
				}
			} else {
				for left := 4; left > 0; {
					idx, _, err := gompj.Waitsome(reqs...)
					if err != nil {
						return err
					}
					left -= len(idx)
				}
			}
			wantL, wantR := make([]float64, n), make([]float64, n)
			fillRun(wantL, left, run+100)
			fillRun(wantR, right, run)
			if !reflect.DeepEqual(fromL, wantL) || !reflect.DeepEqual(fromR, wantR) {
				return fmt.Errorf("%d elements, run %d: wrong halo", n, run)
			}
		}
		for _, r := range reqs {
			if err := r.Free(); err != nil {
				return err
			}
		}
	}
	// Free of an active persistent receive: it still takes the next message, which no later receive sees.
	got := make([]int, 1)
	r, err := c.RecvInit(got, left, 3)
	if err != nil {
		return err
	}
	if err := r.Start(); err != nil {
		return err
	}
	if err := r.Free(); err != nil {
		return err
	}
	if err := c.Send([]int{c.Rank() + 10}, right, 3); err != nil {
		return err
	}
	if err := c.Send([]int{c.Rank() + 20}, right, 3); err != nil {
		return err
	}
	next := make([]int, 1)
	if _, err := c.Recv(next, left, 3); err != nil {
		return err
	}
	if next[0] != left+20 {
		return fmt.Errorf("after Free of an active receive the next receive got %d, want %d", next[0], left+20)
	}
	return nil
}

// Bsend returns at once, whatever the receiver does, and the attached buffer's accounting is exact.
func phaseBuffered(c *gompj.Comm) error {
	left, right := ring(c)
	const n = 200 << 10 // over both protocol switches: the regions stay in use until the receiver copies
	buf := make([]byte, 2*(n+gompj.BsendOverhead))
	if err := c.BufferAttach(buf); err != nil {
		return err
	}
	out := [][]byte{make([]byte, n), make([]byte, n)}
	for k, b := range out {
		for i := range b {
			b[i] = byte(c.Rank()*31 + k*7 + i)
		}
		if err := c.Bsend(b, right, 10+k); err != nil {
			return fmt.Errorf("Bsend %d: %w", k, err)
		}
		b[0]++ // the buffered copy is what goes
	}
	// The buffer is full: nothing more fits, not even a message of no elements (its overhead).
	if err := c.Bsend([]byte{1}, right, 12); !errors.Is(err, gompj.ErrBuffer) {
		return fmt.Errorf("Bsend into a full buffer: %v", err)
	}
	if err := c.Bsend(nil, right, 12); !errors.Is(err, gompj.ErrBuffer) {
		return fmt.Errorf("Bsend of nothing into a full buffer: %v", err)
	}
	// The right neighbour receives a later message first: the buffered sends did not wait for it.
	if err := c.Send([]int{1}, right, 13); err != nil {
		return err
	}
	if _, err := c.Recv(make([]int, 1), left, 13); err != nil {
		return err
	}
	for k := 0; k < 2; k++ {
		in := make([]byte, n)
		if _, err := c.Recv(in, left, 10+k); err != nil {
			return err
		}
		for i := range in {
			if in[i] != byte(left*31+k*7+i) {
				return fmt.Errorf("buffered message %d: byte %d is %d", k, i, in[i])
			}
		}
	}
	back, err := c.BufferDetach()
	if err != nil {
		return err
	}
	if len(back) != len(buf) || unsafe.SliceData(back) != unsafe.SliceData(buf) {
		return fmt.Errorf("BufferDetach returned another buffer")
	}
	if err := c.Bsend([]byte{1}, right, 12); !errors.Is(err, gompj.ErrBuffer) {
		return fmt.Errorf("Bsend after detach: %v", err)
	}
	// Small messages, objects and nil through a small buffer, Ibsend too: eager ones free their region at once.
	if err := c.BufferAttach(make([]byte, 3*(64+gompj.BsendOverhead))); err != nil {
		return err
	}
	type item struct{ A, B string }
	for k := 0; k < 20; k++ {
		if err := c.Bsend([]int64{int64(k)}, right, 14); err != nil {
			return err
		}
		r, err := c.Ibsend(item{fmt.Sprint(k), "x"}, right, 15)
		if err != nil {
			return err
		}
		if _, done, err := r.Test(); !done || err != nil {
			return fmt.Errorf("Ibsend's request is not complete: %v", err)
		}
		if err := c.Bsend(nil, right, 16); err != nil {
			return err
		}
		v := make([]int64, 1)
		var it item
		if _, err := c.Recv(v, left, 14); err != nil || v[0] != int64(k) {
			return fmt.Errorf("small buffered message %d: %v %v", k, v, err)
		}
		if _, err := c.Recv(&it, left, 15); err != nil || it.A != fmt.Sprint(k) {
			return fmt.Errorf("buffered object %d: %+v %v", k, it, err)
		}
		if st, err := c.Recv(nil, left, 16); err != nil || st.Count() != 0 {
			return fmt.Errorf("buffered nil %d: %v", k, err)
		}
	}
	// A persistent buffered send: each Start copies the slice as it is then and completes at once; one that does
	// not fit fails at its Start with ErrBuffer and sends nothing.
	if _, err := c.BufferDetach(); err != nil {
		return err
	}
	if err := c.BufferAttach(make([]byte, 2*(64+gompj.BsendOverhead))); err != nil {
		return err
	}
	vals := make([]int64, 4)
	bs, err := c.BsendInit(vals, right, 17)
	if err != nil {
		return err
	}
	for k := 0; k < 5; k++ {
		vals[0] = int64(100 + k)
		if err := bs.Start(); err != nil {
			return fmt.Errorf("BsendInit run %d: %w", k, err)
		}
		if _, done, err := bs.Test(); !done || err != nil {
			return fmt.Errorf("BsendInit run %d is not complete at once: %v", k, err)
		}
		vals[0] = -1 // the buffered copy is what goes
		in := make([]int64, 4)
		if _, err := c.Recv(in, left, 17); err != nil || in[0] != int64(100+k) {
			return fmt.Errorf("BsendInit run %d received %v: %v", k, in, err)
		}
	}
	big, err := c.BsendInit(make([]int64, 64), right, 18) // 512 bytes: more than the buffer holds
	if err != nil {
		return err
	}
	if err := big.Start(); !errors.Is(err, gompj.ErrBuffer) {
		return fmt.Errorf("BsendInit run that does not fit: %v", err)
	}
	if err := errors.Join(bs.Free(), big.Free()); err != nil {
		return err
	}
	if _, ok, err := c.Iprobe(left, 18); ok || err != nil { // nothing went
		return fmt.Errorf("a BsendInit run that failed sent a message (%v, %v)", ok, err)
	}
	_, err = c.BufferDetach()
	return err
}

func phaseReadyReplace(c *gompj.Comm) error {
	left, right := ring(c)
	for i, n := range apiSizes {
		in := make([]float64, n)
		r, err := c.Irecv(in, left, 20)
		if err != nil {
			return err
		}
		if err := c.Barrier(); err != nil { // every receive is posted: ready mode is legitimate
			return err
		}
		out := make([]float64, n)
		fillRun(out, c.Rank(), n)
		switch i % 3 {
		case 0:
			err = c.Rsend(out, right, 20)
		case 1:
			var s *gompj.Request
			if s, err = c.RsendInit(out, right, 20); err == nil {
				if err = s.Start(); err == nil {
					if _, err = s.Wait(); err == nil {
						err = s.Free()
					}
				}
			}
		default:
			var s *gompj.Request
			if s, err = c.Irsend(out, right, 20); err == nil {
				_, err = s.Wait()
			}
		}
		if err != nil {
			return err
		}
		if _, err := r.Wait(); err != nil {
			return err
		}
		want := make([]float64, n)
		fillRun(want, left, n)
		if !reflect.DeepEqual(in, want) {
			return fmt.Errorf("Rsend of %d elements: wrong data", n)
		}
		// SendrecvReplace: everyone shifts its buffer to the right, in place.
		buf := make([]float64, n)
		fillRun(buf, c.Rank(), 7)
		st, err := c.SendrecvReplace(buf, right, 21, left, 21)
		if err != nil {
			return err
		}
		fillRun(want, left, 7)
		if !reflect.DeepEqual(buf, want) || st.Source != left || st.Count() != n {
			return fmt.Errorf("SendrecvReplace of %d elements: status %+v, data right %v", n, st, reflect.DeepEqual(buf, want))
		}
	}
	type obj struct{ R int }
	o := obj{c.Rank()}
	if _, err := c.SendrecvReplace(&o, right, 22, left, 22); err != nil || o.R != left {
		return fmt.Errorf("SendrecvReplace of an object: %+v %v", o, err)
	}
	if st, err := c.SendrecvReplace(nil, right, 23, left, 23); err != nil || st.Count() != 0 || st.Source != left {
		return fmt.Errorf("SendrecvReplace of nil: %+v %v", st, err)
	}
	return nil
}

// Every other rank sends rank 0 a mix of messages; three goroutines of rank 0 take them with matched probes and
// receive each exactly once, by Recv or Irecv, whatever its type and size.
func phaseMprobe(c *gompj.Comm) error {
	const perSource = 12
	kinds := 6 // small, pooled, local rendezvous, network rendezvous, object, nil
	if c.Rank() != 0 {
		for k := 0; k < perSource; k++ {
			var err error
			tag := 100 + k
			switch k % kinds {
			case 4:
				err = c.Send(map[string]int{"rank": c.Rank(), "k": k}, 0, tag)
			case 5:
				err = c.Send(nil, 0, tag)
			default:
				b := make([]float64, apiSizes[k%kinds])
				fillRun(b, c.Rank(), k)
				err = c.Send(b, 0, tag)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	var mu sync.Mutex
	seen := map[[2]int]bool{}
	total := (c.Size() - 1) * perSource
	all := make(chan struct{})
	errs := make(chan error, 3)
	for g := 0; g < 3; g++ {
		go func(g int) {
			for i := 0; ; i++ {
				var m *gompj.Message
				var st gompj.Status
				var err error
				if g == 2 { // Improbe until something is there
					ok := false
					if m, st, ok, err = c.Improbe(gompj.AnySource, gompj.AnyTag); err == nil && !ok {
						runtime.Gosched()
						continue
					}
				} else {
					m, st, err = c.Mprobe(gompj.AnySource, gompj.AnyTag)
				}
				if err == nil {
					err = receiveProbed(m, st, i%2 == 0)
				}
				if err != nil || st.Tag == 999 { // a marker: every message is in, this goroutine is done
					errs <- err
					return
				}
				mu.Lock()
				key := [2]int{st.Source, st.Tag}
				if seen[key] {
					err = fmt.Errorf("message %v received twice", key)
				}
				seen[key] = true
				if len(seen) == total {
					close(all)
				}
				mu.Unlock()
				if err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	select {
	case <-all:
	case err := <-errs:
		return err // a goroutine failed before the end (the job aborts, which ends the others)
	}
	for k := 0; k < 3; k++ { // one marker for each goroutine, to itself
		if err := c.Send([]int{-1}, 0, 999); err != nil {
			return err
		}
	}
	for k := 0; k < 3; k++ {
		if err := <-errs; err != nil {
			return err
		}
	}
	return nil
}

// receiveProbed receives a probed message by its status, and checks it. A marker (tag 999) is just taken.
func receiveProbed(m *gompj.Message, st gompj.Status, irecv bool) error {
	recv := func(buf any) (gompj.Status, error) {
		if !irecv {
			return m.Recv(buf)
		}
		r, err := m.Irecv(buf)
		if err != nil {
			return gompj.Status{}, err
		}
		return r.Wait()
	}
	if st.Tag == 999 {
		_, err := recv(make([]int, 1))
		return err
	}
	k := st.Tag - 100
	switch st.Type() {
	case ranks.TypeObject:
		// A non-pointer is ErrBuffer and leaves the message to receive.
		if _, err := m.Recv(map[string]int{}); !errors.Is(err, gompj.ErrBuffer) {
			return fmt.Errorf("object into a non-pointer: %v", err)
		}
		var v map[string]int
		if _, err := recv(&v); err != nil || v["rank"] != st.Source || v["k"] != k {
			return fmt.Errorf("object %v: %v", v, err)
		}
	case ranks.TypeNone:
		got, err := recv(nil)
		if err != nil || got.Count() != 0 || st.Count() != 0 {
			return fmt.Errorf("nil message: %+v %v", got, err)
		}
	case ranks.TypeFloat64:
		b := make([]float64, st.Count())
		got, err := recv(b)
		if err != nil {
			return err
		}
		want := make([]float64, apiSizes[k%6])
		fillRun(want, st.Source, k)
		if got.Source != st.Source || got.Tag != st.Tag || !reflect.DeepEqual(b, want) {
			return fmt.Errorf("message %d from %d: status %+v, data right %v", k, st.Source, got, reflect.DeepEqual(b, want))
		}
	default:
		return fmt.Errorf("probed a message of type %v", st.Type())
	}
	if _, err := m.Recv(nil); !errors.Is(err, gompj.ErrRequest) {
		return fmt.Errorf("a message received twice: %v", err)
	}
	return nil
}

// Cancel: an unmatched receive always cancels; a send cancels only if nothing reached the receiver, and then the
// receiver never sees it; otherwise it completes normally. Nothing is lost or delivered twice.
func phaseCancel(c *gompj.Comm) error {
	left, right := ring(c)
	for _, src := range []int{left, gompj.AnySource} {
		r, err := c.Irecv(make([]int, 4), src, 30)
		if err != nil {
			return err
		}
		if err := r.Cancel(); err != nil {
			return err
		}
		st, err := r.Wait()
		if err != nil || !st.Canceled() || st.Count() != 0 || st.Tag != 30 {
			return fmt.Errorf("cancelled receive from %d: %+v %v", src, st, err)
		}
	}
	// The message a cancelled receive would have taken goes to the next receive.
	if err := c.Barrier(); err != nil { // everyone has cancelled
		return err
	}
	if err := c.Send([]int{c.Rank()}, right, 30); err != nil {
		return err
	}
	got := make([]int, 1)
	if _, err := c.Recv(got, left, 30); err != nil || got[0] != left {
		return fmt.Errorf("after cancel: %v %v", got, err)
	}
	// Sends: synchronous small, rendezvous large. The receiver learns whether the send was cancelled, and finds the
	// message exactly when it was not.
	for k, n := range []int{1, 40000} {
		tag := 31 + k
		var s *gompj.Request
		var err error
		if n == 1 {
			s, err = c.Issend(make([]float64, n), right, tag)
		} else {
			s, err = c.Isend(make([]float64, n), right, tag)
		}
		if err != nil {
			return err
		}
		if err := s.Cancel(); err != nil {
			return err
		}
		st, done, err := s.Test()
		if err != nil {
			return err
		}
		canceled := done && st.Canceled()
		flag := 0
		if canceled {
			flag = 1
		}
		if err := c.Send([]int{flag}, right, 40+k); err != nil {
			return err
		}
		theirs := make([]int, 1)
		if _, err := c.Recv(theirs, left, 40+k); err != nil {
			return err
		}
		if theirs[0] == 1 {
			if _, ok, err := c.Iprobe(left, tag); ok || err != nil {
				return fmt.Errorf("a cancelled send of %d elements reached the receiver (%v)", n, err)
			}
		} else if st, err := c.Recv(make([]float64, n), left, tag); err != nil || st.Count() != n {
			return fmt.Errorf("an uncancelled send of %d elements: %+v %v", n, st, err)
		}
		if !done {
			if st, err = s.Wait(); err != nil || st.Canceled() {
				return fmt.Errorf("send of %d elements completed as %+v %v", n, st, err)
			}
		}
		if err := s.Cancel(); err != nil { // inactive now: nothing happens
			return err
		}
	}
	return nil
}

// Waitsome, Testany, Testsome and WaitContext over a mix of requests to and from every rank.
func phaseCompletion(c *gompj.Comm) error {
	np := c.Size()
	var reqs []*gompj.Request
	bufs := make([][]float64, np)
	for p := 0; p < np; p++ {
		bufs[p] = make([]float64, apiSizes[p%len(apiSizes)])
		r, err := c.Irecv(bufs[p], p, 50)
		if err != nil {
			return err
		}
		reqs = append(reqs, r)
	}
	for p := 0; p < np; p++ {
		b := make([]float64, apiSizes[c.Rank()%len(apiSizes)])
		fillRun(b, c.Rank(), p)
		r, err := c.Isend(b, p, 50)
		if err != nil {
			return err
		}
		reqs = append(reqs, r)
	}
	seen := make([]bool, len(reqs))
	for round := 0; ; round++ {
		var idx []int
		var sts []gompj.Status
		var err error
		switch round % 3 {
		case 0:
			idx, sts, err = gompj.Waitsome(reqs...)
		case 1:
			idx, sts, err = gompj.Testsome(reqs...)
			if idx != nil && len(idx) == 0 {
				continue
			}
		case 2:
			i, st, ok, e := gompj.Testany(reqs...)
			switch {
			case e != nil:
				err = e
			case ok && i >= 0:
				idx, sts = []int{i}, []gompj.Status{st}
			case ok:
				idx = nil
			default:
				continue
			}
		}
		if err != nil {
			return err
		}
		if idx == nil {
			break
		}
		for j, i := range idx {
			if seen[i] {
				return fmt.Errorf("request %d reported twice", i)
			}
			seen[i] = true
			if i < np && (sts[j].Source != i || sts[j].Count() != len(bufs[i])) {
				return fmt.Errorf("receive from %d: %+v", i, sts[j])
			}
		}
	}
	for i, s := range seen {
		if !s {
			return fmt.Errorf("request %d never reported", i)
		}
	}
	for p := 0; p < np; p++ {
		want := make([]float64, len(bufs[p]))
		fillRun(want, p, c.Rank())
		if !reflect.DeepEqual(bufs[p], want) {
			return fmt.Errorf("data from %d", p)
		}
	}
	// WaitContext gives up when its context ends, and the request stays valid.
	left, _ := ring(c)
	r, err := c.Irecv(make([]int, 1), left, 51)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := r.WaitContext(ctx); !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("WaitContext of an unmatched receive: %v", err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	go cancel2()
	if _, err := r.WaitContext(ctx2); !errors.Is(err, context.Canceled) {
		return fmt.Errorf("WaitContext cancelled: %v", err)
	}
	if err := c.Barrier(); err != nil { // everyone's timeouts are over
		return err
	}
	_, right := ring(c)
	if err := c.Send([]int{c.Rank()}, right, 51); err != nil {
		return err
	}
	if st, err := r.WaitContext(context.Background()); err != nil || st.Source != left {
		return fmt.Errorf("WaitContext after the timeouts: %+v %v", st, err)
	}
	return nil
}

// Empty messages: nil sends no elements; any message of no elements goes into any buffer, nil included, with
// Count 0; anything else into nil is ErrTruncate, and consumed.
func phaseEmpty(c *gompj.Comm) error {
	left, right := ring(c)
	type obj struct{ X int }
	sends := []func() error{
		func() error { return c.Send(nil, right, 60) },
		func() error { return c.Send(nil, right, 61) },
		func() error { return c.Send([]int{}, right, 62) },
		func() error { return c.Ssend(nil, right, 63) },
		func() error { return c.Send([]float64{1, 2}, right, 64) },
		func() error { return c.Send(obj{5}, right, 65) },
		func() error { return c.Send(make([]byte, 300<<10), right, 66) },
		func() error { return c.Send([]int{7}, right, 67) },
		func() error {
			r, err := c.Isend(nil, right, 68)
			if err == nil {
				_, err = r.Wait()
			}
			return err
		},
	}
	errs := make(chan error, 1)
	go func() { // sends on their own goroutine: Ssend waits for the receive
		for _, s := range sends {
			if err := s(); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	st, err := c.Probe(left, 60)
	if err != nil || st.Count() != 0 || st.Type() != ranks.TypeNone {
		return fmt.Errorf("probe of nil: %+v %v", st, err)
	}
	if st, err := c.Recv(nil, left, 60); err != nil || st.Count() != 0 || st.Source != left {
		return fmt.Errorf("nil into nil: %+v %v", st, err)
	}
	ints := []int{9, 9}
	if st, err := c.Recv(ints, left, 61); err != nil || st.Count() != 0 || ints[0] != 9 {
		return fmt.Errorf("nil into a slice: %+v %v %v", st, ints, err)
	}
	o := obj{3}
	if st, err := c.Recv(&o, left, 62); err != nil || st.Count() != 0 || o.X != 3 || st.Type() != ranks.TypeInt {
		return fmt.Errorf("an empty []int into an object: %+v %v %v", st, o, err)
	}
	m, _, err := c.Mprobe(left, 63)
	if err != nil {
		return err
	}
	if st, err := m.Recv([]float64{}); err != nil || st.Count() != 0 {
		return fmt.Errorf("synchronous nil by Mprobe: %+v %v", st, err)
	}
	for _, tag := range []int{64, 65, 66} {
		if st, err := c.Recv(nil, left, tag); !errors.Is(err, gompj.ErrTruncate) || st.Count() != 0 {
			return fmt.Errorf("tag %d into nil: %+v %v", tag, st, err)
		}
	}
	if _, err := c.Recv(ints, left, 67); err != nil || ints[0] != 7 {
		return fmt.Errorf("after the truncations: %v %v", ints, err)
	}
	r, err := c.Irecv(nil, left, 68)
	if err != nil {
		return err
	}
	if st, err := r.Wait(); err != nil || st.Count() != 0 {
		return fmt.Errorf("Irecv of nil: %+v %v", st, err)
	}
	return <-errs
}

// Bad input to the new calls gets its error class, and loses nothing.
func phaseErrors(c *gompj.Comm) error {
	_, right := ring(c)
	active, err := c.RecvInit(make([]int, 1), right, 70)
	if err != nil {
		return err
	}
	if err := active.Start(); err != nil {
		return err
	}
	freed, _ := c.SendInit([]int{1}, right, 71)
	freed.Free()
	used, _, ok, err := c.Improbe(gompj.ProcNull, 0)
	if err != nil || !ok {
		return fmt.Errorf("Improbe of ProcNull: %v %v", ok, err)
	}
	if st, err := used.Recv(make([]int, 1)); err != nil || st.Source != gompj.ProcNull {
		return fmt.Errorf("the ProcNull message: %+v %v", st, err)
	}
	ch := make(chan int)
	cases := []struct {
		name string
		call func() error
		want error
	}{
		{"SendInit to a rank out of range", func() error { _, err := c.SendInit([]int{1}, c.Size(), 0); return err }, gompj.ErrRank},
		{"SsendInit with a negative tag", func() error { _, err := c.SsendInit([]int{1}, 0, -4); return err }, gompj.ErrTag},
		{"SendInit of a channel", func() error { _, err := c.SendInit(ch, 0, 0); return err }, gompj.ErrBuffer},
		{"RecvInit from a rank out of range", func() error { _, err := c.RecvInit([]int{1}, -9, 0); return err }, gompj.ErrRank},
		{"RecvInit of an object into a non-pointer", func() error { _, err := c.RecvInit(struct{}{}, 0, 0); return err }, gompj.ErrBuffer},
		{"Start of an active request", func() error { return active.Start() }, gompj.ErrRequest},
		{"Startall with an active request", func() error { return gompj.Startall(active) }, gompj.ErrRequest},
		{"Start of a freed request", func() error { return freed.Start() }, gompj.ErrRequest},
		{"Free of a freed request", func() error { return freed.Free() }, gompj.ErrRequest},
		{"Cancel of a freed request", func() error { return freed.Cancel() }, gompj.ErrRequest},
		{"WaitContext of a freed request", func() error { _, err := freed.WaitContext(context.Background()); return err }, gompj.ErrRequest},
		{"Waitsome over a freed request", func() error { _, _, err := gompj.Waitsome(freed); return err }, gompj.ErrRequest},
		{"Bsend with no buffer", func() error { return c.Bsend([]int{1}, right, 0) }, gompj.ErrBuffer},
		{"Ibsend with no buffer", func() error { _, err := c.Ibsend([]int{1}, right, 0); return err }, gompj.ErrBuffer},
		{"BufferDetach with no buffer", func() error { _, err := c.BufferDetach(); return err }, gompj.ErrBuffer},
		{"BufferAttach of nil", func() error { return c.BufferAttach(nil) }, gompj.ErrBuffer},
		{"Bsend to a rank out of range", func() error { return c.Bsend([]int{1}, 99, 0) }, gompj.ErrRank},
		{"Rsend with a negative tag", func() error { return c.Rsend([]int{1}, right, -2) }, gompj.ErrTag},
		{"Irsend to a rank out of range", func() error { _, err := c.Irsend([]int{1}, -7, 0); return err }, gompj.ErrRank},
		{"SendrecvReplace with a bad source", func() error { _, err := c.SendrecvReplace([]int{1}, right, 0, 77, 0); return err }, gompj.ErrRank},
		{"Mprobe from a rank out of range", func() error { _, _, err := c.Mprobe(c.Size(), 0); return err }, gompj.ErrRank},
		{"Improbe with a bad tag", func() error { _, _, _, err := c.Improbe(0, -3); return err }, gompj.ErrTag},
		{"Recv of a received message", func() error { _, err := used.Recv(nil); return err }, gompj.ErrRequest},
		{"Irecv of a nil message", func() error { _, err := (*gompj.Message)(nil).Irecv(nil); return err }, gompj.ErrRequest},
	}
	for _, k := range cases {
		if err := k.call(); !errors.Is(err, k.want) {
			return fmt.Errorf("%s: got %v, want %v", k.name, err, k.want)
		}
	}
	// A buffer too small for a message: ErrBuffer, and the buffer is still there for one that fits.
	if err := c.BufferAttach(make([]byte, 100)); err != nil {
		return err
	}
	if err := c.BufferAttach(make([]byte, 100)); !errors.Is(err, gompj.ErrBuffer) {
		return fmt.Errorf("a second BufferAttach: %v", err)
	}
	if err := c.Bsend(make([]byte, 100-gompj.BsendOverhead+1), right, 72); !errors.Is(err, gompj.ErrBuffer) {
		return fmt.Errorf("Bsend of a message one byte too big: %v", err)
	}
	if err := c.Bsend(make([]byte, 100-gompj.BsendOverhead), right, 72); err != nil {
		return fmt.Errorf("Bsend of a message that just fits: %v", err)
	}
	if _, err := c.BufferDetach(); err != nil {
		return err
	}
	left, _ := ring(c)
	if st, err := c.Recv(make([]byte, 100), left, 72); err != nil || st.Count() != 100-gompj.BsendOverhead {
		return fmt.Errorf("the message that fit: %+v %v", st, err)
	}
	// Nothing was lost: the active receive still completes.
	if err := c.Send([]int{c.Rank()}, left, 70); err != nil {
		return err
	}
	if st, err := active.Wait(); err != nil || st.Source != right {
		return fmt.Errorf("the active receive: %+v %v", st, err)
	}
	return active.Free()
}

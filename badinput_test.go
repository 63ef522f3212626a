package gompj_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gompj/gompj"
)

// The bad-input audit: every family of the public API is called with wrong arguments (ranks, roots, tags, buffers,
// element types, counts and displacements, ops, requests, topologies, views). The project's rule: bad input gets a
// clear error of the documented class (errors.Is), naming what was wrong, never a panic and never a hang, and it
// loses nothing: the same ranks then complete a correct call of the same kind, with the right data, and no stray
// message is left behind by a call that failed.
//
// An argument that every rank sees as bad (a root out of range) fails on every rank. One that only the rank passing
// it can see (a root's receive buffer too small) fails there; as the library documents nothing that tells the
// other ranks, the failing rank calls again with a correct argument, and the others' call completes with that one:
// the failed call must have taken no part in the collective (nothing sent, no operation id or shared-memory slot
// used up). A buffer that does not match what a peer sends (a bcast's reader shorter than the root's data) is seen
// by the receiver only as the data arrives: as for a point-to-point message too long for its receive, the
// receiver fails, the collective is done with, and the others' part of it succeeds (byOneConsumed).
//
// Each job runs many cases and is bounded by badTimeout; a panic inside a call is recovered and reported as a
// failure of that case (so that one defect does not hide the next), and a hang reports the case every rank was
// in, with the goroutines' stacks.

const badTimeout = 20 * time.Second

// badT is one rank's view of an audit job: it checks the cases and knows which one the rank is in.
type badT struct {
	t    *testing.T
	c    *gompj.Comm
	cur  *string
	mu   *sync.Mutex
	rank int
}

// at records the case the rank is in, for the hang report.
func (b *badT) at(name string) {
	b.mu.Lock()
	*b.cur = name
	b.mu.Unlock()
}

// try runs f, turning a panic into an error (and a failure of the case).
func (b *badT) try(name string, f func() error) (err error) {
	b.at(name)
	defer func() {
		if p := recover(); p != nil {
			buf := make([]byte, 8<<10)
			buf = buf[:runtime.Stack(buf, false)]
			b.t.Errorf("rank %d: %s: panicked: %v\n%s", b.rank, name, p, buf)
			err = errBadPanic
		}
	}()
	return f()
}

var errBadPanic = errors.New("the call panicked")

// bad runs f, which must fail with an error of class (and whose text names each of mention).
func (b *badT) bad(name string, class error, f func() error, mention ...string) {
	b.t.Helper()
	err := b.try(name, f)
	switch {
	case err == errBadPanic:
	case err == nil:
		b.t.Errorf("rank %d: %s: no error, want %v", b.rank, name, class)
	case !isClass(err, class):
		b.t.Errorf("rank %d: %s: %v, want class %v", b.rank, name, err, class)
	default:
		for _, m := range mention {
			if !strings.Contains(err.Error(), m) {
				b.t.Errorf("rank %d: %s: error %q does not name %q", b.rank, name, err, m)
			}
		}
	}
}

// ok runs f, which must succeed.
func (b *badT) ok(name string, f func() error) bool {
	b.t.Helper()
	err := b.try(name, f)
	if err != nil && err != errBadPanic {
		b.t.Errorf("rank %d: %s: %v", b.rank, name, err)
	}
	return err == nil
}

// expect reports a failed check of a case's outcome.
func (b *badT) expect(name string, good bool, format string, args ...any) {
	b.t.Helper()
	if !good {
		b.t.Errorf("rank %d: %s: %s", b.rank, name, fmt.Sprintf(format, args...))
	}
}

// quiet checks that no message is waiting for this rank on c from anyone: the failed calls before it sent nothing.
// It is collective over c: a barrier before (local sends are queued at their receiver when they return) and one
// after (so that no rank's next message is taken for a stray one).
func (b *badT) quiet(name string, c *gompj.Comm) {
	b.t.Helper()
	b.ok(name+": barrier before", c.Barrier)
	var st gompj.Status
	var found bool
	if b.ok(name+": iprobe", func() (err error) { st, found, err = c.Iprobe(gompj.AnySource, gompj.AnyTag); return }) {
		b.expect(name, !found, "a stray message is waiting: from %d, tag %d, %d elements", st.Source, st.Tag, st.Count())
	}
	b.ok(name+": barrier after", c.Barrier)
}

// badJob runs body on n ranks of one node, bounded by badTimeout.
func badJob(t *testing.T, n int, body func(b *badT) error) {
	t.Helper()
	var mu sync.Mutex
	cur := make([]string, n)
	done := make(chan error, 1)
	go func() {
		done <- gompj.RunWith(gompj.Config{Ranks: n}, func(c *gompj.Comm) error {
			return body(&badT{t: t, c: c, cur: &cur[c.Rank()], mu: &mu, rank: c.Rank()})
		})
	}()
	timer := time.NewTimer(badTimeout)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-timer.C:
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		mu.Lock()
		where := slices.Clone(cur)
		mu.Unlock()
		t.Fatalf("the job hung for %v; the ranks were in %q\n%s", badTimeout, where, buf)
	}
}

// Wrong ranks and tags, in each family of calls that takes them.
var (
	badRanks = func(n int) []int {
		return []int{-3, -4, -1000, n, n + 1, 1 << 40, math.MinInt, math.MaxInt, gompj.Undefined}
	}
	badTags = []int{-2, -1000, math.MaxInt32 + 1, math.MinInt, math.MaxInt}
)

type badStruct struct {
	A int
	B string
}

// TestBadInputPointToPoint: sends, receives, probes and persistent requests with wrong peers, tags and buffers;
// then a receive into the wrong type or a too-short buffer, which consumes the message and affects nothing else.
func TestBadInputPointToPoint(t *testing.T) {
	badJob(t, 4, func(b *badT) error {
		c, n, me := b.c, b.c.Size(), b.c.Rank()
		right, left := (me+1)%n, (me+n-1)%n
		x := []float64{1, 2, 3}
		y := make([]float64, 3)
		if !b.ok("attach", func() error { return c.BufferAttach(make([]byte, 1<<16)) }) {
			return nil
		}
		type sendFn func(buf any, peer, tag int) error
		sends := map[string]sendFn{
			"Send":      c.Send,
			"Ssend":     c.Ssend,
			"Rsend":     c.Rsend,
			"Bsend":     c.Bsend,
			"Isend":     func(buf any, p, tag int) error { return reqErr(c.Isend(buf, p, tag)) },
			"Issend":    func(buf any, p, tag int) error { return reqErr(c.Issend(buf, p, tag)) },
			"Irsend":    func(buf any, p, tag int) error { return reqErr(c.Irsend(buf, p, tag)) },
			"Ibsend":    func(buf any, p, tag int) error { return reqErr(c.Ibsend(buf, p, tag)) },
			"SendInit":  func(buf any, p, tag int) error { return reqErr(c.SendInit(buf, p, tag)) },
			"SsendInit": func(buf any, p, tag int) error { return reqErr(c.SsendInit(buf, p, tag)) },
			"BsendInit": func(buf any, p, tag int) error { return reqErr(c.BsendInit(buf, p, tag)) },
			"RsendInit": func(buf any, p, tag int) error { return reqErr(c.RsendInit(buf, p, tag)) },
			"Sendrecv(dest)": func(buf any, p, tag int) error {
				_, err := c.Sendrecv(buf, p, tag, y, left, 0)
				return err
			},
			"SendrecvReplace(dest)": func(buf any, p, tag int) error {
				_, err := c.SendrecvReplace(slices.Clone(x), p, tag, left, 0)
				return err
			},
		}
		recvs := map[string]sendFn{
			"Recv":     func(buf any, p, tag int) error { _, err := c.Recv(buf, p, tag); return err },
			"Irecv":    func(buf any, p, tag int) error { return reqErr(c.Irecv(buf, p, tag)) },
			"RecvInit": func(buf any, p, tag int) error { return reqErr(c.RecvInit(buf, p, tag)) },
			"Probe":    func(_ any, p, tag int) error { _, err := c.Probe(p, tag); return err },
			"Iprobe":   func(_ any, p, tag int) error { _, _, err := c.Iprobe(p, tag); return err },
			"Mprobe": func(_ any, p, tag int) error {
				m, _, err := c.Mprobe(p, tag)
				if m != nil && err != nil {
					return fmt.Errorf("a message with the error %w", err)
				}
				return err
			},
			"Improbe": func(_ any, p, tag int) error {
				m, _, _, err := c.Improbe(p, tag)
				if m != nil && err != nil {
					return fmt.Errorf("a message with the error %w", err)
				}
				return err
			},
			"Sendrecv(source)": func(buf any, p, tag int) error {
				_, err := c.Sendrecv(x, right, 0, buf, p, tag)
				return err
			},
			"SendrecvReplace(source)": func(buf any, p, tag int) error {
				_, err := c.SendrecvReplace(buf, right, 0, p, tag)
				return err
			},
		}
		for _, name := range slices.Sorted(maps.Keys(sends)) {
			f := sends[name]
			for _, r := range append(badRanks(n), gompj.AnySource) {
				b.bad(fmt.Sprintf("%s to rank %d", name, r), gompj.ErrRank, func() error { return f(x, r, 0) }, fmt.Sprint(r))
			}
			for _, tag := range append(badTags, gompj.AnyTag) {
				b.bad(fmt.Sprintf("%s with tag %d", name, tag), gompj.ErrTag, func() error { return f(x, right, tag) }, fmt.Sprint(tag))
				b.bad(fmt.Sprintf("%s to ProcNull with tag %d", name, tag), gompj.ErrTag, func() error { return f(x, gompj.ProcNull, tag) }, fmt.Sprint(tag))
			}
		}
		for _, name := range slices.Sorted(maps.Keys(recvs)) {
			f := recvs[name]
			for _, r := range badRanks(n) {
				b.bad(fmt.Sprintf("%s from rank %d", name, r), gompj.ErrRank, func() error { return f(slices.Clone(y), r, 0) }, fmt.Sprint(r))
			}
			for _, tag := range badTags {
				b.bad(fmt.Sprintf("%s with tag %d", name, tag), gompj.ErrTag, func() error { return f(slices.Clone(y), left, tag) }, fmt.Sprint(tag))
				b.bad(fmt.Sprintf("%s from ProcNull with tag %d", name, tag), gompj.ErrTag, func() error { return f(slices.Clone(y), gompj.ProcNull, tag) }, fmt.Sprint(tag))
			}
		}

		// Buffers no message can be made of, or received into.
		var nilView *gompj.View
		for _, buf := range []any{make(chan int), func() {}, nilView, &gompj.View{}} {
			for _, name := range []string{"Send", "Isend", "SendInit", "Bsend", "Sendrecv(dest)"} {
				b.bad(fmt.Sprintf("%s of a %T", name, buf), gompj.ErrBuffer, func() error { return sends[name](buf, right, 0) })
			}
		}
		for _, buf := range []any{badStruct{}, []badStruct{}, 7, make(chan int), nilView, &gompj.View{}} {
			for _, name := range []string{"Recv", "Irecv", "RecvInit", "Sendrecv(source)"} {
				b.bad(fmt.Sprintf("%s into a %T", name, buf), gompj.ErrBuffer, func() error { return recvs[name](buf, left, 0) })
			}
		}
		b.quiet("after the bad point-to-point calls", c)

		// The edges of the legal ranges are legal.
		b.ok("Sendrecv on tag MaxTag with the last rank", func() error {
			got := make([]float64, 3)
			last := n - 1
			var err error
			switch me {
			case 0:
				_, err = c.Sendrecv(x, last, gompj.MaxTag, got, last, 0)
			case last:
				_, err = c.Sendrecv(x, 0, 0, got, 0, gompj.MaxTag)
			}
			if err == nil && (me == 0 || me == last) && !slices.Equal(got, x) {
				err = fmt.Errorf("got %v", got)
			}
			return err
		})

		// The same calls done right still work: a ring shift by each kind of send and receive.
		for i, name := range []string{"Send", "Ssend", "Rsend", "Bsend", "Isend", "Issend", "Irsend", "Ibsend"} {
			want := []float64{float64(me), float64(i), -1}
			b.ok(name+" done right", func() error {
				var r *gompj.Request
				var err error
				got := make([]float64, 3)
				switch {
				case strings.HasPrefix(name, "I"):
					if r, err = map[string]func(any, int, int) (*gompj.Request, error){
						"Isend": c.Isend, "Issend": c.Issend, "Irsend": c.Irsend, "Ibsend": c.Ibsend,
					}[name](want, right, i); err != nil {
						return err
					}
					if _, err := c.Recv(got, left, i); err != nil {
						return err
					}
					_, err = r.Wait()
				case me%2 == 0:
					if err := sends[name](want, right, i); err != nil {
						return err
					}
					_, err = c.Recv(got, left, i)
				default:
					if _, err := c.Recv(got, left, i); err != nil {
						return err
					}
					err = sends[name](want, right, i)
				}
				if err == nil && !slices.Equal(got, []float64{float64(left), float64(i), -1}) {
					err = fmt.Errorf("got %v from rank %d", got, left)
				}
				return err
			})
		}
		b.ok("Sendrecv done right", func() error {
			got := make([]float64, 1)
			if _, err := c.Sendrecv([]float64{float64(me)}, right, 9, got, left, 9); err != nil {
				return err
			}
			if got[0] != float64(left) {
				return fmt.Errorf("got %v", got)
			}
			return nil
		})

		// Receives that match a message they cannot take: ErrType or ErrTruncate, the message consumed, what fits
		// delivered, and the next message on the same tag is the next one sent.
		type mismatch struct {
			name  string
			send  any
			recv  func() any
			class error
			count int // Status.Count() on ErrTruncate
		}
		var sb badStruct
		cases := []mismatch{
			{"float64 into int32", []float64{1, 2, 3}, func() any { return make([]int32, 3) }, gompj.ErrType, -1},
			{"float64 into float32", []float64{1, 2, 3}, func() any { return make([]float32, 8) }, gompj.ErrType, -1},
			{"5 into 3", []float64{1, 2, 3, 4, 5}, func() any { return make([]float64, 3) }, gompj.ErrTruncate, 3},
			{"int32 into nil", []int32{1}, func() any { return nil }, gompj.ErrTruncate, 0},
			{"object into float64", &badStruct{1, "a"}, func() any { return make([]float64, 8) }, gompj.ErrType, -1},
			{"float64 into an object", []float64{1}, func() any { return &sb }, gompj.ErrType, -1},
			{"array into a shorter array", [3]int{1, 2, 3}, func() any { return new([2]int) }, gompj.ErrTruncate, 1},
		}
		for _, how := range []string{"Recv", "Irecv", "RecvInit", "Sendrecv", "Mprobe"} {
			for i, k := range cases {
				name := fmt.Sprintf("%s of %s", how, k.name)
				tag := 100 + i
				next := []float64{float64(me), float64(tag)}
				if me%2 == 0 { // the even ranks send to the odd ones
					b.ok(name+": send", func() error {
						if how == "Sendrecv" {
							return nil // the receiver's Sendrecv sends us its nil message; we send with the pair below
						}
						if err := c.Send(k.send, right, tag); err != nil {
							return err
						}
						return c.Send(next, right, tag)
					})
					if how == "Sendrecv" {
						b.ok(name+": sendrecv", func() error {
							if _, err := c.Sendrecv(k.send, right, tag, nil, right, tag); err != nil {
								return err
							}
							return c.Send(next, right, tag)
						})
					}
					continue
				}
				var st gompj.Status
				err := b.try(name, func() error {
					buf := k.recv()
					var err error
					switch how {
					case "Recv":
						st, err = c.Recv(buf, left, tag)
					case "Irecv":
						var r *gompj.Request
						if r, err = c.Irecv(buf, left, tag); err != nil {
							return fmt.Errorf("%w (at Irecv)", err)
						}
						st, err = r.Wait()
					case "RecvInit":
						var r *gompj.Request
						if r, err = c.RecvInit(buf, left, tag); err != nil {
							return fmt.Errorf("%w (at RecvInit)", err)
						}
						defer r.Free()
						if err = r.Start(); err != nil {
							return fmt.Errorf("%w (at Start)", err)
						}
						st, err = r.Wait()
					case "Sendrecv":
						st, err = c.Sendrecv(nil, left, tag, buf, left, tag)
					case "Mprobe":
						var m *gompj.Message
						if m, _, err = c.Mprobe(left, tag); err != nil {
							return fmt.Errorf("%w (at Mprobe)", err)
						}
						st, err = m.Recv(buf)
						if _, err2 := m.Recv(buf); !errors.Is(err2, gompj.ErrRequest) {
							b.t.Errorf("rank %d: %s: a second receive of the message: %v, want ErrRequest", me, name, err2)
						}
					}
					return err
				})
				if !errors.Is(err, k.class) {
					b.t.Errorf("rank %d: %s: %v, want %v", me, name, err, k.class)
				} else if k.count >= 0 && st.Count() != k.count {
					b.t.Errorf("rank %d: %s: Status.Count() %d, want %d", me, name, st.Count(), k.count)
				}
				b.ok(name+": the next message", func() error {
					got := make([]float64, 2)
					if _, err := c.Recv(got, left, tag); err != nil {
						return err
					}
					if !slices.Equal(got, []float64{float64(left), float64(tag)}) {
						return fmt.Errorf("got %v, want the next message", got)
					}
					return nil
				})
			}
		}
		b.quiet("after the mismatches", c)
		b.ok("detach", func() error { _, err := c.BufferDetach(); return err })
		return nil
	})
}

// TestBadInputRequests: the completion calls, Start, Startall, Cancel and Free on nil, freed, inactive and active
// requests, point-to-point and collective.
func TestBadInputRequests(t *testing.T) {
	badJob(t, 2, func(b *badT) error {
		c, me := b.c, b.c.Rank()
		other := 1 - me
		var null *gompj.Request
		b.bad("Wait(nil)", gompj.ErrRequest, func() error { _, err := null.Wait(); return err })
		b.bad("Test(nil)", gompj.ErrRequest, func() error { _, _, err := null.Test(); return err })
		b.bad("WaitContext(nil)", gompj.ErrRequest, func() error { _, err := null.WaitContext(context.Background()); return err })
		b.bad("Start(nil)", gompj.ErrRequest, func() error { return null.Start() })
		b.bad("Free(nil)", gompj.ErrRequest, func() error { return null.Free() })
		b.bad("Cancel(nil)", gompj.ErrRequest, func() error { return null.Cancel() })
		b.bad("Startall(nil)", gompj.ErrRequest, func() error { return gompj.Startall(null) })
		// The completion calls on lists skip nil (and inactive) requests.
		b.ok("Waitall(nil)", func() error { return gompj.Waitall(null, null) })
		b.ok("Waitany(nil)", func() error {
			if i, _, err := gompj.Waitany(null); err != nil || i != -1 {
				return fmt.Errorf("%d, %v; want -1", i, err)
			}
			return nil
		})
		b.ok("Waitsome(nil)", func() error {
			if is, _, err := gompj.Waitsome(null); err != nil || is != nil {
				return fmt.Errorf("%v, %v; want nil", is, err)
			}
			return nil
		})
		b.ok("Testall(nil)", func() error {
			if ok, err := gompj.Testall(null); err != nil || !ok {
				return fmt.Errorf("%v, %v; want true", ok, err)
			}
			return nil
		})
		b.ok("Testany(nil)", func() error {
			if i, _, ok, err := gompj.Testany(null); err != nil || i != -1 || !ok {
				return fmt.Errorf("%d %v, %v; want -1 true", i, ok, err)
			}
			return nil
		})
		b.ok("Testsome(nil)", func() error {
			if is, _, err := gompj.Testsome(null); err != nil || is != nil {
				return fmt.Errorf("%v, %v; want nil", is, err)
			}
			return nil
		})

		// Freed requests of every kind: any use is ErrRequest.
		freed := map[string]func() (*gompj.Request, error){
			"persistent send":    func() (*gompj.Request, error) { return c.SendInit([]int{1}, other, 1) },
			"persistent receive": func() (*gompj.Request, error) { return c.RecvInit(make([]int, 1), other, 1) },
			"completed send": func() (*gompj.Request, error) {
				r, err := c.Isend([]int{1}, gompj.ProcNull, 1)
				if err == nil {
					_, err = r.Wait()
				}
				return r, err
			},
			"active receive":   func() (*gompj.Request, error) { return c.Irecv(make([]int, 1), me, 4242) },
			"persistent bcast": func() (*gompj.Request, error) { return c.BcastInit(make([]int, 1), 0) },
			"completed ibarrier": func() (*gompj.Request, error) {
				r, err := c.Ibarrier()
				if err == nil {
					_, err = r.Wait()
				}
				return r, err
			},
		}
		for _, kind := range slices.Sorted(maps.Keys(freed)) {
			var r *gompj.Request
			if !b.ok("make a "+kind, func() (err error) { r, err = freed[kind](); return }) {
				continue
			}
			b.ok("Free a "+kind, r.Free)
			name := "freed " + kind + ": "
			b.bad(name+"Wait", gompj.ErrRequest, func() error { _, err := r.Wait(); return err }, "freed")
			b.bad(name+"WaitContext", gompj.ErrRequest, func() error { _, err := r.WaitContext(context.Background()); return err })
			b.bad(name+"Test", gompj.ErrRequest, func() error { _, _, err := r.Test(); return err })
			b.bad(name+"Start", gompj.ErrRequest, r.Start)
			b.bad(name+"Startall", gompj.ErrRequest, func() error { return gompj.Startall(r) })
			b.bad(name+"Free", gompj.ErrRequest, r.Free)
			b.bad(name+"Cancel", gompj.ErrRequest, r.Cancel)
			b.bad(name+"Waitall", gompj.ErrRequest, func() error { return gompj.Waitall(r) })
			b.bad(name+"Waitany", gompj.ErrRequest, func() error { _, _, err := gompj.Waitany(r); return err })
			b.bad(name+"Waitsome", gompj.ErrRequest, func() error { _, _, err := gompj.Waitsome(r); return err })
			b.bad(name+"Testall", gompj.ErrRequest, func() error { _, err := gompj.Testall(r); return err })
			b.bad(name+"Testany", gompj.ErrRequest, func() error { _, _, _, err := gompj.Testany(r); return err })
			b.bad(name+"Testsome", gompj.ErrRequest, func() error { _, _, err := gompj.Testsome(r); return err })
		}
		// The freed active receive still takes its message (MPI_Request_free): a message to self on its tag is gone.
		b.ok("the freed receive takes its message", func() error { return c.Send([]int{7}, me, 4242) })
		b.quiet("after the freed requests", c)

		// Inactive requests: the completion calls return at once; Start of a non-persistent one is ErrRequest.
		var done, coll *gompj.Request
		b.ok("a completed send", func() (err error) {
			if done, err = c.Isend([]int{1}, gompj.ProcNull, 0); err == nil {
				_, err = done.Wait()
			}
			return
		})
		b.ok("a completed ibarrier", func() (err error) {
			if coll, err = c.Ibarrier(); err == nil {
				_, err = coll.Wait()
			}
			return
		})
		for name, r := range map[string]*gompj.Request{"send": done, "ibarrier": coll} {
			if r == nil {
				continue
			}
			b.bad("Start of a completed "+name, gompj.ErrRequest, r.Start, "not persistent")
			b.bad("Startall of a completed "+name, gompj.ErrRequest, func() error { return gompj.Startall(r) })
			b.ok("Wait of an inactive "+name, func() error {
				if st, err := r.Wait(); err != nil || st != (gompj.Status{}) {
					return fmt.Errorf("%+v, %v; want an empty status", st, err)
				}
				return nil
			})
			b.ok("Waitany of an inactive "+name, func() error {
				if i, _, err := gompj.Waitany(r, nil); err != nil || i != -1 {
					return fmt.Errorf("%d, %v; want -1", i, err)
				}
				return nil
			})
		}
		// A collective cannot be cancelled, and the failed Cancel loses nothing: the collective completes.
		b.ok("Cancel of an ibarrier", func() error {
			r, err := c.Ibarrier()
			if err != nil {
				return err
			}
			if err := r.Cancel(); !errors.Is(err, gompj.ErrRequest) {
				return fmt.Errorf("Cancel: %v, want ErrRequest", err)
			}
			st, err := r.Wait()
			if err == nil && st.Canceled() {
				err = errors.New("cancelled")
			}
			return err
		})

		// Start of an active persistent request, and Startall with one that cannot start, start nothing.
		in1, in2 := make([]int, 1), make([]int, 1)
		var r1, r2, p *gompj.Request
		b.ok("RecvInit 1", func() (err error) { r1, err = c.RecvInit(in1, me, 501); return })
		b.ok("RecvInit 2", func() (err error) { r2, err = c.RecvInit(in2, me, 502); return })
		b.ok("BcastInit", func() (err error) { p, err = c.BcastInit(make([]int, 2), 0); return })
		if r1 == nil || r2 == nil || p == nil {
			return nil
		}
		b.ok("Start 2", r2.Start)
		b.bad("Start of an active receive", gompj.ErrRequest, r2.Start, "active")
		b.bad("Startall with an active receive", gompj.ErrRequest, func() error { return gompj.Startall(r1, r2) }, "request 1")
		b.bad("Startall with a request twice", gompj.ErrRequest, func() error { return gompj.Startall(r1, p, r1) }, "request 2")
		b.bad("Startall with a nil request", gompj.ErrRequest, func() error { return gompj.Startall(r1, nil) }, "request 1")
		b.ok("Send to self 501", func() error { return c.Send([]int{501}, me, 501) })
		b.ok("request 1 was not started", func() error {
			if _, found, err := c.Iprobe(me, 501); err != nil || !found {
				return fmt.Errorf("the message to self is gone (%v): a failed Startall started the receive", err)
			}
			return nil
		})
		b.ok("the bcast was not started", func() error {
			if _, ok, err := p.Test(); err != nil || !ok {
				return fmt.Errorf("Test: %v %v, want an inactive request", ok, err)
			}
			return nil
		})
		b.ok("Startall done right", func() error { return gompj.Startall(r1, p) })
		b.bad("Start of an active bcast", gompj.ErrRequest, p.Start, "active")
		b.ok("Send to self 502", func() error { return c.Send([]int{502}, me, 502) })
		b.ok("Waitall", func() error { return gompj.Waitall(r1, r2, p) })
		b.expect("the persistent receives' data", in1[0] == 501 && in2[0] == 502, "got %v %v", in1, in2)
		// The calls on lists fail with a freed request whatever the others' state, and lose nothing: the active
		// requests they were given are still to be reported. (Waitany and Testany used to return a request before
		// the freed one that was done, Testall false at one that was not.)
		var act, pn *gompj.Request
		b.ok("Irecv", func() (err error) { act, err = c.Irecv(in1, me, 503); return })
		b.ok("Isend to ProcNull", func() (err error) { pn, err = c.Isend([]int{1}, gompj.ProcNull, 0); return })
		b.ok("Free the persistent receive", r1.Free)
		b.bad("Waitany with a freed request", gompj.ErrRequest, func() error { _, _, err := gompj.Waitany(pn, r1); return err }, "request 1")
		b.bad("Testany with a freed request", gompj.ErrRequest, func() error { _, _, _, err := gompj.Testany(pn, r1); return err }, "request 1")
		b.bad("Waitsome with a freed request", gompj.ErrRequest, func() error { _, _, err := gompj.Waitsome(pn, r1); return err }, "request 1")
		b.bad("Testsome with a freed request", gompj.ErrRequest, func() error { _, _, err := gompj.Testsome(pn, r1); return err }, "request 1")
		b.bad("Testall with a freed request", gompj.ErrRequest, func() error { _, err := gompj.Testall(act, r1); return err }, "request 1")
		b.ok("Send 503 to self", func() error { return c.Send([]int{503 + me}, me, 503) })
		b.bad("Waitall with a freed request", gompj.ErrRequest, func() error { return gompj.Waitall(act, pn, r1) })
		b.expect("Waitall completed the active request", in1[0] == 503+me, "got %v", in1)
		b.ok("Wait of the requests Waitall completed", func() error {
			for _, r := range []*gompj.Request{act, pn} {
				if st, err := r.Wait(); err != nil || st != (gompj.Status{}) {
					return fmt.Errorf("%+v, %v; want an inactive request", st, err)
				}
			}
			return nil
		})
		for _, r := range []*gompj.Request{r2, p} {
			b.ok("Free", r.Free)
		}
		// WaitContext that gives up leaves the request active and valid.
		b.ok("WaitContext that gives up", func() error {
			got := make([]int, 1)
			r, err := c.Irecv(got, me, 601)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if _, err := r.WaitContext(ctx); !errors.Is(err, context.Canceled) {
				return fmt.Errorf("WaitContext: %v, want context.Canceled", err)
			}
			if err := c.Send([]int{601}, me, 601); err != nil {
				return err
			}
			if _, err := r.Wait(); err != nil || got[0] != 601 {
				return fmt.Errorf("then Wait: %v, %v", got, err)
			}
			return nil
		})

		// Matched probes: a nil Message, and a buffer that cannot receive, which leaves the message to receive.
		var nilMsg *gompj.Message
		b.bad("Recv of a nil Message", gompj.ErrRequest, func() error { _, err := nilMsg.Recv(in1); return err })
		b.bad("Irecv of a nil Message", gompj.ErrRequest, func() error { return reqErr(nilMsg.Irecv(in1)) })
		b.ok("Send an object to self", func() error { return c.Send(&badStruct{7, "seven"}, me, 602) })
		var msg *gompj.Message
		b.ok("Mprobe", func() (err error) { msg, _, err = c.Mprobe(me, 602); return })
		if msg != nil {
			b.bad("Message.Recv into a non-pointer", gompj.ErrBuffer, func() error { _, err := msg.Recv(badStruct{}); return err })
			b.bad("Message.Irecv into a nil pointer", gompj.ErrBuffer, func() error { return reqErr(msg.Irecv((*badStruct)(nil))) })
			b.ok("Message.Recv done right", func() error {
				var v badStruct
				if _, err := msg.Recv(&v); err != nil || v != (badStruct{7, "seven"}) {
					return fmt.Errorf("%+v, %v", v, err)
				}
				return nil
			})
		}

		// Buffered sends: no buffer, a message that does not fit, attaching twice, detaching none. A failed
		// buffered send sends nothing; a persistent one that does not fit fails at its Start and can start again.
		b.bad("Bsend without a buffer", gompj.ErrBuffer, func() error { return c.Bsend([]int{1}, other, 0) })
		b.bad("Ibsend without a buffer", gompj.ErrBuffer, func() error { return reqErr(c.Ibsend([]int{1}, other, 0)) })
		b.bad("BufferDetach without a buffer", gompj.ErrBuffer, func() error { _, err := c.BufferDetach(); return err })
		b.bad("BufferAttach of nil", gompj.ErrBuffer, func() error { return c.BufferAttach(nil) })
		b.ok("BufferAttach", func() error { return c.BufferAttach(make([]byte, 64+gompj.BsendOverhead)) })
		b.bad("BufferAttach twice", gompj.ErrBuffer, func() error { return c.BufferAttach(make([]byte, 64)) })
		b.bad("Bsend of more than fits", gompj.ErrBuffer, func() error { return c.Bsend(make([]byte, 65), other, 0) })
		var bs *gompj.Request
		big := make([]byte, 100)
		b.ok("BsendInit of more than fits", func() (err error) { bs, err = c.BsendInit(big, other, 603); return })
		if bs != nil {
			b.bad("Start of a buffered send that does not fit", gompj.ErrBuffer, bs.Start)
			b.bad("Start of it again", gompj.ErrBuffer, bs.Start)
		}
		b.quiet("after the failed buffered sends", c)
		b.ok("BufferDetach", func() error { _, err := c.BufferDetach(); return err })
		b.ok("BufferAttach a larger one", func() error { return c.BufferAttach(make([]byte, 256)) })
		if bs != nil {
			b.ok("Start of the buffered send, done right", func() error {
				big[0] = byte(me + 1)
				if err := bs.Start(); err != nil {
					return err
				}
				if _, err := bs.Wait(); err != nil {
					return err
				}
				got := make([]byte, 100)
				if _, err := c.Recv(got, other, 603); err != nil {
					return err
				}
				if got[0] != byte(other+1) {
					return fmt.Errorf("got %d", got[0])
				}
				return bs.Free()
			})
		}
		b.ok("BufferDetach", func() error { _, err := c.BufferDetach(); return err })
		b.quiet("after the requests", c)
		return nil
	})
}

// oneOf is a set of acceptable error classes, where the documentation leaves the choice open.
type oneOf []error

func (o oneOf) Error() string {
	var s []string
	for _, e := range o {
		s = append(s, e.Error())
	}
	return "one of " + strings.Join(s, ", ")
}

func isClass(err, class error) bool {
	if o, ok := class.(oneOf); ok {
		for _, c := range o {
			if errors.Is(err, c) {
				return true
			}
		}
		return false
	}
	return errors.Is(err, class)
}

// collMode is how a collective is called: blocking, nonblocking and Wait, or persistent (Init, Start, Wait, Free).
type collMode int

const (
	blockingMode collMode = iota
	nonblockingMode
	persistentMode
)

func (m collMode) String() string { return [...]string{"blocking", "nonblocking", "persistent"}[m] }

// colls calls the collectives of c in mode m.
type colls struct {
	c *gompj.Comm
	m collMode
}

type reqFn = func() (*gompj.Request, error)

// waitReq waits for a request that a call returned with err: exactly one of them must be nil.
func waitReq(r *gompj.Request, err error) error {
	if err != nil {
		if r != nil {
			return fmt.Errorf("a request with the error %w", err)
		}
		return err
	}
	if r == nil {
		return errors.New("a nil request and a nil error")
	}
	_, err = r.Wait()
	return err
}

func (k colls) run(block func() error, nb, init reqFn) error {
	switch k.m {
	case blockingMode:
		return block()
	case nonblockingMode:
		return waitReq(nb())
	}
	r, err := init()
	if err != nil || r == nil {
		return waitReq(r, err)
	}
	if err := r.Start(); err != nil {
		r.Free()
		return fmt.Errorf("%w (at Start)", err)
	}
	_, err = r.Wait()
	if ferr := r.Free(); ferr != nil && err == nil {
		err = ferr
	}
	return err
}

func (k colls) Barrier() error {
	c := k.c
	return k.run(c.Barrier, c.Ibarrier, c.BarrierInit)
}

func (k colls) Bcast(buf any, root int) error {
	c := k.c
	return k.run(func() error { return c.Bcast(buf, root) },
		func() (*gompj.Request, error) { return c.Ibcast(buf, root) },
		func() (*gompj.Request, error) { return c.BcastInit(buf, root) })
}

func (k colls) Reduce(send, recv any, op gompj.Op, root int) error {
	c := k.c
	return k.run(func() error { return c.Reduce(send, recv, op, root) },
		func() (*gompj.Request, error) { return c.Ireduce(send, recv, op, root) },
		func() (*gompj.Request, error) { return c.ReduceInit(send, recv, op, root) })
}

func (k colls) Allreduce(send, recv any, op gompj.Op) error {
	c := k.c
	return k.run(func() error { return c.Allreduce(send, recv, op) },
		func() (*gompj.Request, error) { return c.Iallreduce(send, recv, op) },
		func() (*gompj.Request, error) { return c.AllreduceInit(send, recv, op) })
}

func (k colls) Gather(send, recv any, root int) error {
	c := k.c
	return k.run(func() error { return c.Gather(send, recv, root) },
		func() (*gompj.Request, error) { return c.Igather(send, recv, root) },
		func() (*gompj.Request, error) { return c.GatherInit(send, recv, root) })
}

func (k colls) Gatherv(send, recv any, counts, displs []int, root int) error {
	c := k.c
	return k.run(func() error { return c.Gatherv(send, recv, counts, displs, root) },
		func() (*gompj.Request, error) { return c.Igatherv(send, recv, counts, displs, root) },
		func() (*gompj.Request, error) { return c.GathervInit(send, recv, counts, displs, root) })
}

func (k colls) Scatter(send, recv any, root int) error {
	c := k.c
	return k.run(func() error { return c.Scatter(send, recv, root) },
		func() (*gompj.Request, error) { return c.Iscatter(send, recv, root) },
		func() (*gompj.Request, error) { return c.ScatterInit(send, recv, root) })
}

func (k colls) Scatterv(send any, counts, displs []int, recv any, root int) error {
	c := k.c
	return k.run(func() error { return c.Scatterv(send, counts, displs, recv, root) },
		func() (*gompj.Request, error) { return c.Iscatterv(send, counts, displs, recv, root) },
		func() (*gompj.Request, error) { return c.ScattervInit(send, counts, displs, recv, root) })
}

func (k colls) Allgather(send, recv any) error {
	c := k.c
	return k.run(func() error { return c.Allgather(send, recv) },
		func() (*gompj.Request, error) { return c.Iallgather(send, recv) },
		func() (*gompj.Request, error) { return c.AllgatherInit(send, recv) })
}

func (k colls) Allgatherv(send, recv any, counts, displs []int) error {
	c := k.c
	return k.run(func() error { return c.Allgatherv(send, recv, counts, displs) },
		func() (*gompj.Request, error) { return c.Iallgatherv(send, recv, counts, displs) },
		func() (*gompj.Request, error) { return c.AllgathervInit(send, recv, counts, displs) })
}

func (k colls) Alltoall(send, recv any) error {
	c := k.c
	return k.run(func() error { return c.Alltoall(send, recv) },
		func() (*gompj.Request, error) { return c.Ialltoall(send, recv) },
		func() (*gompj.Request, error) { return c.AlltoallInit(send, recv) })
}

func (k colls) Alltoallv(send any, sc, sd []int, recv any, rc, rd []int) error {
	c := k.c
	return k.run(func() error { return c.Alltoallv(send, sc, sd, recv, rc, rd) },
		func() (*gompj.Request, error) { return c.Ialltoallv(send, sc, sd, recv, rc, rd) },
		func() (*gompj.Request, error) { return c.AlltoallvInit(send, sc, sd, recv, rc, rd) })
}

func (k colls) ReduceScatter(send, recv any, counts []int, op gompj.Op) error {
	c := k.c
	return k.run(func() error { return c.ReduceScatter(send, recv, counts, op) },
		func() (*gompj.Request, error) { return c.IreduceScatter(send, recv, counts, op) },
		func() (*gompj.Request, error) { return c.ReduceScatterInit(send, recv, counts, op) })
}

func (k colls) ReduceScatterBlock(send, recv any, op gompj.Op) error {
	c := k.c
	return k.run(func() error { return c.ReduceScatterBlock(send, recv, op) },
		func() (*gompj.Request, error) { return c.IreduceScatterBlock(send, recv, op) },
		func() (*gompj.Request, error) { return c.ReduceScatterBlockInit(send, recv, op) })
}

func (k colls) Scan(send, recv any, op gompj.Op) error {
	c := k.c
	return k.run(func() error { return c.Scan(send, recv, op) },
		func() (*gompj.Request, error) { return c.Iscan(send, recv, op) },
		func() (*gompj.Request, error) { return c.ScanInit(send, recv, op) })
}

func (k colls) Exscan(send, recv any, op gompj.Op) error {
	c := k.c
	return k.run(func() error { return c.Exscan(send, recv, op) },
		func() (*gompj.Request, error) { return c.Iexscan(send, recv, op) },
		func() (*gompj.Request, error) { return c.ExscanInit(send, recv, op) })
}

// badVal is element i of rank r's data in the collective cases.
func badVal(r, i int) float64 { return float64(r*1000 + i + 1) }

func badFill(r, n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = badVal(r, i)
	}
	return s
}

// badWant compares got with want.
func badWant(what string, got, want []float64) error {
	if !slices.Equal(got, want) {
		return fmt.Errorf("%s: got %v, want %v", what, got, want)
	}
	return nil
}

// Who passes the bad argument of a collective case.
const (
	byAll  = iota // every rank: every rank fails
	byRoot        // the root only (its receive buffer, counts...): it fails, then calls again right
	byOne         // one rank that is not the root
	// one rank that is not the root, whose buffer does not match the root's data: as a receive too short for its
	// message (which consumes the message), the collective is done with, the others' part of it succeeds, and
	// nobody calls it again
	byOneConsumed
)

type collCase struct {
	name    string
	who     int
	class   error
	bad     func(k colls) error
	good    func(k colls) error // the same collective done right, checking its result
	mention []string
	modes   []collMode // nil: all three
}

const badRoot, badOne = 1, 2 // the root of the rooted cases, and the rank of the byOne cases

// collCases are the bad calls of the collectives on n ranks (at least 3), seen from rank me.
func collCases(n, me int) []collCase {
	const m = 3 // elements per rank
	root := badRoot
	// The correct calls, checking their results.
	bcast := func(k colls) error {
		buf := make([]float64, m)
		if me == root {
			buf = badFill(root, m)
		}
		if err := k.Bcast(buf, root); err != nil {
			return err
		}
		return badWant("bcast", buf, badFill(root, m))
	}
	sumOf := func(i int) float64 { // the sum over the ranks of badVal(r, i)
		s := 0.0
		for r := 0; r < n; r++ {
			s += badVal(r, i)
		}
		return s
	}
	sums := func(k int) []float64 {
		s := make([]float64, k)
		for i := range s {
			s[i] = sumOf(i)
		}
		return s
	}
	reduce := func(k colls) error {
		recv := make([]float64, m)
		if err := k.Reduce(badFill(me, m), recv, gompj.Sum, root); err != nil || me != root {
			return err
		}
		return badWant("reduce", recv, sums(m))
	}
	allreduce := func(k colls) error {
		recv := make([]float64, m)
		if err := k.Allreduce(badFill(me, m), recv, gompj.Sum); err != nil {
			return err
		}
		return badWant("allreduce", recv, sums(m))
	}
	gathered := func(counts []int) []float64 {
		var s []float64
		for r := 0; r < n; r++ {
			s = append(s, badFill(r, counts[r])...)
		}
		return s
	}
	same := func(k int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = k
		}
		return s
	}
	vcounts := make([]int, n) // rank r's block has r+1 elements
	vtotal := 0
	for r := range vcounts {
		vcounts[r] = r + 1
		vtotal += r + 1
	}
	gather := func(k colls) error {
		recv := make([]float64, n*m)
		if err := k.Gather(badFill(me, m), recv, root); err != nil || me != root {
			return err
		}
		return badWant("gather", recv, gathered(same(m)))
	}
	gatherv := func(k colls) error {
		recv := make([]float64, vtotal)
		if err := k.Gatherv(badFill(me, me+1), recv, vcounts, nil, root); err != nil || me != root {
			return err
		}
		return badWant("gatherv", recv, gathered(vcounts))
	}
	scatter := func(k colls) error {
		recv := make([]float64, m)
		if err := k.Scatter(gathered(same(m)), recv, root); err != nil {
			return err
		}
		return badWant("scatter", recv, badFill(me, m))
	}
	scatterv := func(k colls) error {
		recv := make([]float64, me+1)
		if err := k.Scatterv(gathered(vcounts), vcounts, nil, recv, root); err != nil {
			return err
		}
		return badWant("scatterv", recv, badFill(me, me+1))
	}
	allgather := func(k colls) error {
		recv := make([]float64, n*m)
		if err := k.Allgather(badFill(me, m), recv); err != nil {
			return err
		}
		return badWant("allgather", recv, gathered(same(m)))
	}
	allgatherv := func(k colls) error {
		recv := make([]float64, vtotal)
		if err := k.Allgatherv(badFill(me, me+1), recv, vcounts, nil); err != nil {
			return err
		}
		return badWant("allgatherv", recv, gathered(vcounts))
	}
	alltoall := func(k colls) error {
		var send, want []float64
		for j := 0; j < n; j++ {
			send = append(send, badFill(me*n+j, m)...)
			want = append(want, badFill(j*n+me, m)...)
		}
		recv := make([]float64, n*m)
		if err := k.Alltoall(send, recv); err != nil {
			return err
		}
		return badWant("alltoall", recv, want)
	}
	alltoallv := func(k colls) error { // rank r sends j+1 elements to rank j
		var send, want []float64
		for j := 0; j < n; j++ {
			send = append(send, badFill(me*n+j, j+1)...)
			want = append(want, badFill(j*n+me, me+1)...)
		}
		recv := make([]float64, n*(me+1))
		if err := k.Alltoallv(send, vcounts, nil, recv, same(me+1), nil); err != nil {
			return err
		}
		return badWant("alltoallv", recv, want)
	}
	reduceScatter := func(k colls) error {
		recv := make([]float64, me+1)
		if err := k.ReduceScatter(badFill(me, vtotal), recv, vcounts, gompj.Sum); err != nil {
			return err
		}
		off := me * (me + 1) / 2
		return badWant("reduce_scatter", recv, sums(vtotal)[off:off+me+1])
	}
	reduceScatterBlock := func(k colls) error {
		recv := make([]float64, m)
		if err := k.ReduceScatterBlock(badFill(me, n*m), recv, gompj.Sum); err != nil {
			return err
		}
		return badWant("reduce_scatter_block", recv, sums(n * m)[me*m:me*m+m])
	}
	scanned := func(upto int) []float64 {
		s := make([]float64, m)
		for r := 0; r < upto; r++ {
			for i := range s {
				s[i] += badVal(r, i)
			}
		}
		return s
	}
	scan := func(k colls) error {
		recv := make([]float64, m)
		if err := k.Scan(badFill(me, m), recv, gompj.Sum); err != nil {
			return err
		}
		return badWant("scan", recv, scanned(me+1))
	}
	exscan := func(k colls) error {
		recv := make([]float64, m)
		if err := k.Exscan(badFill(me, m), recv, gompj.Sum); err != nil || me == 0 {
			return err
		}
		return badWant("exscan", recv, scanned(me))
	}
	barrier := func(k colls) error { return k.Barrier() }

	f := func(k int) []float64 { return make([]float64, k) }
	i32 := func(k int) []int32 { return make([]int32, k) }
	var nilView *gompj.View
	var cs []collCase
	add := func(c collCase) { cs = append(cs, c) }
	anyBuf := oneOf{gompj.ErrBuffer, gompj.ErrArg}

	// Roots: out of range everywhere (ProcNull and Root are an intercommunicator's).
	for _, r := range append(badRanks(n), gompj.AnySource, gompj.ProcNull, gompj.Root) {
		rs := fmt.Sprint(r)
		add(collCase{"Bcast root " + rs, byAll, gompj.ErrRoot, func(k colls) error { return k.Bcast(f(m), r) }, bcast, []string{rs}, nil})
		add(collCase{"Reduce root " + rs, byAll, gompj.ErrRoot, func(k colls) error { return k.Reduce(f(m), f(m), gompj.Sum, r) }, reduce, []string{rs}, nil})
		add(collCase{"Gather root " + rs, byAll, gompj.ErrRoot, func(k colls) error { return k.Gather(f(m), f(n*m), r) }, gather, []string{rs}, nil})
		add(collCase{"Gatherv root " + rs, byAll, gompj.ErrRoot, func(k colls) error { return k.Gatherv(f(m), f(n*m), same(m), nil, r) }, gatherv, []string{rs}, nil})
		add(collCase{"Scatter root " + rs, byAll, gompj.ErrRoot, func(k colls) error { return k.Scatter(f(n*m), f(m), r) }, scatter, []string{rs}, nil})
		add(collCase{"Scatterv root " + rs, byAll, gompj.ErrRoot, func(k colls) error { return k.Scatterv(f(n*m), same(m), nil, f(m), r) }, scatterv, []string{rs}, nil})
	}
	// A root that differs on one rank is an erroneous program MPI does not detect either: not a case.

	// Buffers that are not buffers.
	for _, buf := range []any{nil, nilView, &gompj.View{}, make(chan int), func() {}} {
		bs := fmt.Sprintf("%T", buf)
		add(collCase{"Bcast of " + bs, byAll, gompj.ErrBuffer, func(k colls) error { return k.Bcast(buf, root) }, bcast, nil, nil})
		add(collCase{"Reduce send " + bs, byAll, gompj.ErrBuffer, func(k colls) error { return k.Reduce(buf, f(m), gompj.Sum, root) }, reduce, nil, nil})
		add(collCase{"Reduce recv " + bs, byRoot, gompj.ErrBuffer, func(k colls) error { return k.Reduce(f(m), buf, gompj.Sum, root) }, reduce, nil, nil})
		add(collCase{"Allreduce send " + bs, byAll, gompj.ErrBuffer, func(k colls) error { return k.Allreduce(buf, f(m), gompj.Sum) }, allreduce, nil, nil})
		add(collCase{"Allreduce recv " + bs, byAll, gompj.ErrBuffer, func(k colls) error { return k.Allreduce(f(m), buf, gompj.Sum) }, allreduce, nil, nil})
		add(collCase{"Gather recv " + bs, byRoot, gompj.ErrBuffer, func(k colls) error { return k.Gather(f(m), buf, root) }, gather, nil, nil})
		add(collCase{"Gatherv send " + bs, byAll, gompj.ErrBuffer, func(k colls) error { return k.Gatherv(buf, f(n*m), same(m), nil, root) }, gatherv, nil, nil})
		add(collCase{"Scatter send " + bs, byRoot, gompj.ErrBuffer, func(k colls) error { return k.Scatter(buf, f(m), root) }, scatter, nil, nil})
		add(collCase{"Scatterv recv " + bs, byAll, gompj.ErrBuffer, func(k colls) error { return k.Scatterv(f(n*m), same(m), nil, buf, root) }, scatterv, nil, nil})
		add(collCase{"Allgather recv " + bs, byAll, gompj.ErrBuffer, func(k colls) error { return k.Allgather(f(m), buf) }, allgather, nil, nil})
		add(collCase{"Allgatherv send " + bs, byAll, gompj.ErrBuffer, func(k colls) error { return k.Allgatherv(buf, f(n*m), same(m), nil) }, allgatherv, nil, nil})
		add(collCase{"Alltoall send " + bs, byAll, gompj.ErrBuffer, func(k colls) error { return k.Alltoall(buf, f(n*m)) }, alltoall, nil, nil})
		add(collCase{"Alltoallv recv " + bs, byAll, gompj.ErrBuffer, func(k colls) error { return k.Alltoallv(f(n), same(1), nil, buf, same(1), nil) }, alltoallv, nil, nil})
		add(collCase{"ReduceScatter send " + bs, byAll, gompj.ErrBuffer, func(k colls) error { return k.ReduceScatter(buf, f(m), same(1), gompj.Sum) }, reduceScatter, nil, nil})
		add(collCase{"ReduceScatterBlock recv " + bs, byAll, gompj.ErrBuffer, func(k colls) error { return k.ReduceScatterBlock(f(n*m), buf, gompj.Sum) }, reduceScatterBlock, nil, nil})
		add(collCase{"Scan send " + bs, byAll, gompj.ErrBuffer, func(k colls) error { return k.Scan(buf, f(m), gompj.Sum) }, scan, nil, nil})
		add(collCase{"Exscan recv " + bs, byAll, gompj.ErrBuffer, func(k colls) error { return k.Exscan(f(m), buf, gompj.Sum) }, exscan, nil, nil})
	}
	// Reductions of structs: not a buffer a reduction takes.
	add(collCase{"Allreduce of []struct", byAll, anyBuf, func(k colls) error { return k.Allreduce(make([]badStruct, m), make([]badStruct, m), gompj.Sum) }, allreduce, nil, nil})
	add(collCase{"Scan of []struct", byAll, anyBuf, func(k colls) error { return k.Scan(make([]badStruct, m), make([]badStruct, m), gompj.Sum) }, scan, nil, nil})

	// Ops.
	userF32 := gompj.NewOp(func(in, inout []float32) {}, true)
	for _, o := range []struct {
		name string
		op   gompj.Op
		buf  func() any
	}{
		{"the zero Op", gompj.Op{}, func() any { return f(m) }},
		{"Sum of bool", gompj.Sum, func() any { return make([]bool, m) }},
		{"Band of float64", gompj.Band, func() any { return f(m) }},
		{"Lxor of complex128", gompj.Lxor, func() any { return make([]complex128, m) }},
		{"Max of complex64", gompj.Max, func() any { return make([]complex64, m) }},
		{"MaxLoc of float64", gompj.MaxLoc, func() any { return f(m) }},
		{"Sum of Loc", gompj.Sum, func() any { return make([]gompj.ValueIndex, m) }},
		{"a float32 op of float64", userF32, func() any { return f(m) }},
	} {
		add(collCase{"Reduce with " + o.name, byAll, gompj.ErrOp, func(k colls) error { return k.Reduce(o.buf(), o.buf(), o.op, root) }, reduce, nil, nil})
		add(collCase{"Allreduce with " + o.name, byAll, gompj.ErrOp, func(k colls) error { return k.Allreduce(o.buf(), o.buf(), o.op) }, allreduce, nil, nil})
		add(collCase{"ReduceScatterBlock with " + o.name, byAll, gompj.ErrOp, func(k colls) error {
			s := o.buf()
			return k.ReduceScatterBlock(gompj.InPlace, reflectGrow(s, n), o.op)
		}, reduceScatterBlock, nil, nil})
		add(collCase{"Scan with " + o.name, byAll, gompj.ErrOp, func(k colls) error { return k.Scan(o.buf(), o.buf(), o.op) }, scan, nil, nil})
		add(collCase{"Exscan with " + o.name, byAll, gompj.ErrOp, func(k colls) error { return k.Exscan(o.buf(), o.buf(), o.op) }, exscan, nil, nil})
	}

	// Element types that differ between a rank's own send and receive buffers.
	add(collCase{"Reduce float64 into int32", byRoot, gompj.ErrType, func(k colls) error { return k.Reduce(f(m), i32(m), gompj.Sum, root) }, reduce, nil, nil})
	add(collCase{"Allreduce float64 into int32", byAll, gompj.ErrType, func(k colls) error { return k.Allreduce(f(m), i32(m), gompj.Sum) }, allreduce, nil, nil})
	add(collCase{"Gather float64 into int32", byRoot, gompj.ErrType, func(k colls) error { return k.Gather(f(m), i32(n*m), root) }, gather, nil, nil})
	add(collCase{"Gatherv float64 into int32", byRoot, gompj.ErrType, func(k colls) error { return k.Gatherv(f(root+1), i32(vtotal), vcounts, nil, root) }, gatherv, nil, nil})
	add(collCase{"Scatter float64 into int32", byRoot, gompj.ErrType, func(k colls) error { return k.Scatter(f(n*m), i32(m), root) }, scatter, nil, nil})
	add(collCase{"Scatterv float64 into int32", byRoot, gompj.ErrType, func(k colls) error { return k.Scatterv(f(vtotal), vcounts, nil, i32(root+1), root) }, scatterv, nil, nil})
	add(collCase{"Allgather float64 into int32", byAll, gompj.ErrType, func(k colls) error { return k.Allgather(f(m), i32(n*m)) }, allgather, nil, nil})
	add(collCase{"Allgatherv float64 into int32", byAll, gompj.ErrType, func(k colls) error { return k.Allgatherv(f(me+1), i32(vtotal), vcounts, nil) }, allgatherv, nil, nil})
	add(collCase{"Alltoall float64 into int32", byAll, gompj.ErrType, func(k colls) error { return k.Alltoall(f(n*m), i32(n*m)) }, alltoall, nil, nil})
	add(collCase{"Alltoallv float64 into int32", byAll, gompj.ErrType, func(k colls) error { return k.Alltoallv(f(n), same(1), nil, i32(n), same(1), nil) }, alltoallv, nil, nil})
	add(collCase{"ReduceScatter float64 into int32", byAll, gompj.ErrType, func(k colls) error { return k.ReduceScatter(f(vtotal), i32(me+1), vcounts, gompj.Sum) }, reduceScatter, nil, nil})
	add(collCase{"ReduceScatterBlock float64 into int32", byAll, gompj.ErrType, func(k colls) error { return k.ReduceScatterBlock(f(n*m), i32(m), gompj.Sum) }, reduceScatterBlock, nil, nil})
	add(collCase{"Scan float64 into int32", byAll, gompj.ErrType, func(k colls) error { return k.Scan(f(m), i32(m), gompj.Sum) }, scan, nil, nil})
	add(collCase{"Exscan float64 into int32", byAll, gompj.ErrType, func(k colls) error { return k.Exscan(f(m), i32(m), gompj.Sum) }, exscan, nil, nil})

	// Receive buffers too short for what the rank's own arguments say.
	add(collCase{"Reduce into a short buffer", byRoot, gompj.ErrTruncate, func(k colls) error { return k.Reduce(f(m), f(m-1), gompj.Sum, root) }, reduce, nil, nil})
	add(collCase{"Allreduce into a short buffer", byAll, gompj.ErrTruncate, func(k colls) error { return k.Allreduce(f(m), f(m-1), gompj.Sum) }, allreduce, nil, nil})
	add(collCase{"Allreduce into a short buffer on one rank", byOne, gompj.ErrTruncate, func(k colls) error { return k.Allreduce(f(m), f(m-1), gompj.Sum) }, allreduce, nil, nil})
	add(collCase{"Gather into a short buffer", byRoot, gompj.ErrTruncate, func(k colls) error { return k.Gather(f(m), f(n*m-1), root) }, gather, []string{fmt.Sprint(n*m - 1)}, nil})
	add(collCase{"Scatter into a short buffer at the root", byRoot, gompj.ErrTruncate, func(k colls) error { return k.Scatter(f(n*m), f(m-1), root) }, scatter, nil, nil})
	add(collCase{"Allgather into a short buffer", byAll, gompj.ErrTruncate, func(k colls) error { return k.Allgather(f(m), f(n*m-1)) }, allgather, nil, nil})
	add(collCase{"Allgather into a short buffer on one rank", byOne, gompj.ErrTruncate, func(k colls) error { return k.Allgather(f(m), f(n*m-1)) }, allgather, nil, nil})
	add(collCase{"Alltoall into a short buffer", byAll, gompj.ErrTruncate, func(k colls) error { return k.Alltoall(f(n*m), f(n*m-1)) }, alltoall, nil, nil})
	add(collCase{"Allgatherv sending more than its count", byAll, gompj.ErrTruncate, func(k colls) error { return k.Allgatherv(f(me+2), f(vtotal), vcounts, nil) }, allgatherv, nil, nil})
	add(collCase{"ReduceScatter into a short buffer", byAll, gompj.ErrTruncate, func(k colls) error { return k.ReduceScatter(f(vtotal), f(me), vcounts, gompj.Sum) }, reduceScatter, nil, nil})
	add(collCase{"Scan into a short buffer", byAll, gompj.ErrTruncate, func(k colls) error { return k.Scan(f(m), f(m-1), gompj.Sum) }, scan, nil, nil})

	// A receive buffer shorter than the root's data, on one rank: what the root sends is seen there only.
	add(collCase{"Bcast into a short buffer on one rank", byOneConsumed, gompj.ErrTruncate, func(k colls) error { return k.Bcast(f(m-1), root) }, bcast, nil, nil})
	add(collCase{"Scatter into a short buffer on one rank", byOneConsumed, gompj.ErrTruncate, func(k colls) error { return k.Scatter(nil, f(m-1), root) }, scatter, nil, nil})
	add(collCase{"Scatterv into a short buffer on one rank", byOneConsumed, gompj.ErrTruncate, func(k colls) error { return k.Scatterv(nil, nil, nil, f(badOne), root) }, scatterv, nil, nil})
	// Of another element type: the shared-memory paths compare the bytes, not the types (as the collectives'
	// documentation says, element types are not all compared across ranks): a float64's bytes into twice as many
	// int32s pass unseen. Here the sizes differ.
	add(collCase{"Bcast of another type on one rank", byOneConsumed, oneOf{gompj.ErrType, gompj.ErrTruncate}, func(k colls) error { return k.Bcast(i32(m), root) }, bcast, nil, nil})
	add(collCase{"Scatter into another type on one rank", byOneConsumed, oneOf{gompj.ErrType, gompj.ErrTruncate}, func(k colls) error { return k.Scatter(nil, i32(m), root) }, scatter, nil, nil})

	// Sizes that do not divide among the ranks.
	add(collCase{"Scatter of a send not divisible", byRoot, gompj.ErrArg, func(k colls) error { return k.Scatter(f(n*m+1), f(m), root) }, scatter, []string{fmt.Sprint(n*m + 1)}, nil})
	add(collCase{"Alltoall of a send not divisible", byAll, gompj.ErrArg, func(k colls) error { return k.Alltoall(f(n*m+1), f(n*m+1)) }, alltoall, nil, nil})
	add(collCase{"Gather in place, recv not divisible", byRoot, gompj.ErrArg, func(k colls) error { return k.Gather(gompj.InPlace, f(n*m+1), root) }, gather, nil, nil})
	add(collCase{"Allgather in place, recv not divisible", byAll, gompj.ErrArg, func(k colls) error { return k.Allgather(gompj.InPlace, f(n*m+1)) }, allgather, nil, nil})
	add(collCase{"Alltoall in place, recv not divisible", byAll, gompj.ErrArg, func(k colls) error { return k.Alltoall(gompj.InPlace, f(n*m+1)) }, alltoall, nil, nil})
	add(collCase{"ReduceScatterBlock in place, not divisible", byAll, gompj.ErrArg, func(k colls) error { return k.ReduceScatterBlock(gompj.InPlace, f(n*m+1), gompj.Sum) }, reduceScatterBlock, nil, nil})
	add(collCase{"ReduceScatterBlock send not size blocks", byAll, gompj.ErrArg, func(k colls) error { return k.ReduceScatterBlock(f(n*m+1), f(m), gompj.Sum) }, reduceScatterBlock, nil, nil})

	// Counts and displacements.
	type cd struct {
		name           string
		counts, displs []int
		class          error
	}
	neg := same(1)
	neg[n-1] = -1
	negD := make([]int, n)
	negD[1] = -2
	past := make([]int, n) // the last block starts where it cannot fit
	for r := range past {
		past[r] = r
	}
	past[n-1] = n*m - 1
	huge := make([]int, n)
	huge[0] = math.MaxInt / 2
	overflow := same(math.MaxInt / 2)
	var cds = []cd{
		{"too few counts", same(1)[:n-1], nil, gompj.ErrArg},
		{"too many counts", same(1), nil, gompj.ErrArg},
		{"nil counts", nil, nil, gompj.ErrArg},
		{"a negative count", neg, nil, gompj.ErrArg},
		{"too few displacements", same(m), make([]int, n-1), gompj.ErrArg},
		{"a negative displacement", same(m), negD, gompj.ErrArg},
		{"a block past the buffer", same(m), past, gompj.ErrTruncate},
		{"a huge displacement", same(1), huge, oneOf{gompj.ErrTruncate, gompj.ErrArg}},
		{"counts that overflow", overflow, nil, oneOf{gompj.ErrTruncate, gompj.ErrArg}},
	}
	cds[1].counts = append(same(1), 1)
	for _, x := range cds {
		add(collCase{"Gatherv with " + x.name, byRoot, x.class, func(k colls) error { return k.Gatherv(f(m), f(n*m), x.counts, x.displs, root) }, gatherv, nil, nil})
		add(collCase{"Scatterv with " + x.name, byRoot, x.class, func(k colls) error { return k.Scatterv(f(n*m), x.counts, x.displs, f(m), root) }, scatterv, nil, nil})
		add(collCase{"Allgatherv with " + x.name, byAll, x.class, func(k colls) error { return k.Allgatherv(f(0), f(n*m), x.counts, x.displs) }, allgatherv, nil, nil})
		add(collCase{"Alltoallv send with " + x.name, byAll, x.class, func(k colls) error { return k.Alltoallv(f(n*m), x.counts, x.displs, f(n*m), same(0), nil) }, alltoallv, nil, nil})
		add(collCase{"Alltoallv recv with " + x.name, byAll, x.class, func(k colls) error { return k.Alltoallv(f(n*m), same(0), nil, f(n*m), x.counts, x.displs) }, alltoallv, nil, nil})
		if x.displs == nil {
			add(collCase{"ReduceScatter with " + x.name, byAll, oneOf{gompj.ErrArg, x.class}, func(k colls) error { return k.ReduceScatter(f(n), f(m), x.counts, gompj.Sum) }, reduceScatter, nil, nil})
		}
	}
	add(collCase{"ReduceScatter in place, counts that overflow", byAll, gompj.ErrArg, func(k colls) error { return k.ReduceScatter(gompj.InPlace, f(m), overflow, gompj.Sum) }, reduceScatter, nil, nil})
	add(collCase{"ReduceScatter counts not adding up", byAll, gompj.ErrArg, func(k colls) error { return k.ReduceScatter(f(n+1), f(1), same(1), gompj.Sum) }, reduceScatter, nil, nil})
	add(collCase{"ReduceScatter in place, counts past recv", byAll, gompj.ErrTruncate, func(k colls) error { return k.ReduceScatter(gompj.InPlace, f(n-1), same(1), gompj.Sum) }, reduceScatter, nil, nil})

	// InPlace where it is not allowed.
	add(collCase{"Bcast in place", byAll, anyBuf, func(k colls) error { return k.Bcast(gompj.InPlace, root) }, bcast, nil, nil})
	add(collCase{"Reduce in place off the root", byOne, gompj.ErrArg, func(k colls) error { return k.Reduce(gompj.InPlace, f(m), gompj.Sum, root) }, reduce, []string{"InPlace"}, nil})
	add(collCase{"Reduce into InPlace", byRoot, anyBuf, func(k colls) error { return k.Reduce(f(m), gompj.InPlace, gompj.Sum, root) }, reduce, nil, nil})
	add(collCase{"Allreduce into InPlace", byAll, anyBuf, func(k colls) error { return k.Allreduce(f(m), gompj.InPlace, gompj.Sum) }, allreduce, nil, nil})
	add(collCase{"Allreduce InPlace both", byAll, anyBuf, func(k colls) error { return k.Allreduce(gompj.InPlace, gompj.InPlace, gompj.Sum) }, allreduce, nil, nil})
	add(collCase{"Gather in place off the root", byOne, gompj.ErrArg, func(k colls) error { return k.Gather(gompj.InPlace, f(n*m), root) }, gather, []string{"InPlace"}, nil})
	add(collCase{"Gather into InPlace", byRoot, anyBuf, func(k colls) error { return k.Gather(f(m), gompj.InPlace, root) }, gather, nil, nil})
	add(collCase{"Gatherv in place off the root", byOne, gompj.ErrArg, func(k colls) error { return k.Gatherv(gompj.InPlace, f(vtotal), vcounts, nil, root) }, gatherv, []string{"InPlace"}, nil})
	add(collCase{"Scatter in place off the root", byOne, gompj.ErrArg, func(k colls) error { return k.Scatter(f(n*m), gompj.InPlace, root) }, scatter, []string{"InPlace"}, nil})
	add(collCase{"Scatter from InPlace", byRoot, anyBuf, func(k colls) error { return k.Scatter(gompj.InPlace, f(m), root) }, scatter, nil, nil})
	add(collCase{"Scatterv in place off the root", byOne, gompj.ErrArg, func(k colls) error { return k.Scatterv(f(vtotal), vcounts, nil, gompj.InPlace, root) }, scatterv, []string{"InPlace"}, nil})
	add(collCase{"Allgather into InPlace", byAll, anyBuf, func(k colls) error { return k.Allgather(f(m), gompj.InPlace) }, allgather, nil, nil})
	add(collCase{"Alltoallv in place", byAll, anyBuf, func(k colls) error { return k.Alltoallv(gompj.InPlace, same(1), nil, f(n), same(1), nil) }, alltoallv, nil, nil})
	add(collCase{"Scan into InPlace", byAll, anyBuf, func(k colls) error { return k.Scan(f(m), gompj.InPlace, gompj.Sum) }, scan, nil, nil})

	// Objects (msgpack-encoded values) where a collective takes them, passed wrong.
	obcast := func(k colls) error {
		v := badStruct{}
		if me == root {
			v = badStruct{root, "root"}
		}
		if err := k.Bcast(&v, root); err != nil {
			return err
		}
		if v != (badStruct{root, "root"}) {
			return fmt.Errorf("object bcast: got %+v", v)
		}
		return nil
	}
	ogather := func(k colls) error {
		var all []badStruct
		if err := k.Gather(badStruct{me, "g"}, &all, root); err != nil || me != root {
			return err
		}
		for r, v := range all {
			if v != (badStruct{r, "g"}) {
				return fmt.Errorf("object gather: got %+v", all)
			}
		}
		return nil
	}
	oscatter := func(k colls) error {
		var send []badStruct
		for r := 0; r < n; r++ {
			send = append(send, badStruct{r, "s"})
		}
		var v badStruct
		if err := k.Scatter(send, &v, root); err != nil {
			return err
		}
		if v != (badStruct{me, "s"}) {
			return fmt.Errorf("object scatter: got %+v", v)
		}
		return nil
	}
	oallgather := func(k colls) error {
		var all []badStruct
		if err := k.Allgather(badStruct{me, "a"}, &all); err != nil {
			return err
		}
		for r, v := range all {
			if v != (badStruct{r, "a"}) {
				return fmt.Errorf("object allgather: got %+v", all)
			}
		}
		return nil
	}
	add(collCase{"Allgather of objects into a non-pointer on one rank", byOne, gompj.ErrBuffer, func(k colls) error { return k.Allgather(badStruct{me, "a"}, []badStruct{}) }, oallgather, nil, nil})
	add(collCase{"Allgather of objects into another type", byAll, gompj.ErrType, func(k colls) error { return k.Allgather(badStruct{me, "a"}, new([]int)) }, oallgather, nil, nil})
	add(collCase{"Bcast of an object not by pointer", byAll, gompj.ErrBuffer, func(k colls) error { return k.Bcast(badStruct{1, "x"}, root) }, obcast, nil, nil})
	add(collCase{"Bcast of an object into a nil pointer", byOne, gompj.ErrBuffer, func(k colls) error { return k.Bcast((*badStruct)(nil), root) }, obcast, nil, nil})
	add(collCase{"Gather of objects into a non-pointer", byRoot, gompj.ErrBuffer, func(k colls) error { return k.Gather(badStruct{me, "g"}, []badStruct{}, root) }, ogather, nil, nil})
	add(collCase{"Gather of objects into a pointer to a non-slice", byRoot, gompj.ErrBuffer, func(k colls) error { return k.Gather(badStruct{me, "g"}, new(badStruct), root) }, ogather, nil, nil})
	add(collCase{"Gather of objects into another type", byRoot, gompj.ErrType, func(k colls) error { return k.Gather(badStruct{me, "g"}, new([]string), root) }, ogather, nil, nil})
	add(collCase{"Scatter of objects, too few", byRoot, gompj.ErrBuffer, func(k colls) error { return k.Scatter(make([]badStruct, n-1), new(badStruct), root) }, oscatter, nil, nil})
	add(collCase{"Scatter of objects into a non-pointer", byOne, gompj.ErrBuffer, func(k colls) error { return k.Scatter(nil, badStruct{}, root) }, oscatter, nil, nil})
	add(collCase{"Scatter of objects into another type at the root", byRoot, gompj.ErrType, func(k colls) error {
		return k.Scatter(make([]badStruct, n), new(string), root)
	}, oscatter, nil, nil})

	add(collCase{"Barrier (none)", -1, nil, nil, barrier, nil, nil})
	return cs
}

// reflectGrow returns a zeroed slice of s's type with len(s)*k elements.
func reflectGrow(s any, k int) any {
	switch s := s.(type) {
	case []float64:
		return make([]float64, len(s)*k)
	case []bool:
		return make([]bool, len(s)*k)
	case []complex128:
		return make([]complex128, len(s)*k)
	case []complex64:
		return make([]complex64, len(s)*k)
	case []gompj.ValueIndex:
		return make([]gompj.ValueIndex, len(s)*k)
	}
	panic(fmt.Sprintf("reflectGrow: %T", s))
}

// TestBadInputCollectives: every collective, blocking, nonblocking and persistent, with bad roots, buffers, ops,
// element types, lengths, counts and displacements, and InPlace where it is not allowed.
func TestBadInputCollectives(t *testing.T) {
	badJob(t, 4, func(b *badT) error {
		c := b.c
		b.bad("ForceAlgorithm of an unknown collective", gompj.ErrArg, func() error { return c.ForceAlgorithm("bcastt", "binomial") }, "bcastt")
		b.bad("ForceAlgorithm of an unknown algorithm", gompj.ErrArg, func() error { return c.ForceAlgorithm("bcast", "quantum") }, "quantum")
		// The cases run on the default algorithms (shared memory, on one node), then on the message-based ones
		// that jobs spanning nodes take, on a communicator of their own.
		byMessages, err := c.Dup()
		if err != nil {
			return err
		}
		for coll, algo := range map[string]string{"barrier": "dissemination", "bcast": "binomial", "reduce": "binomial",
			"allreduce": "recursive_doubling", "gather": "linear", "gatherv": "linear", "scatter": "linear",
			"scatterv": "linear", "allgather": "ring", "allgatherv": "ring", "alltoall": "pairwise",
			"alltoallv": "pairwise", "reduce_scatter": "reduce_scatterv", "scan": "chain", "exscan": "chain"} {
			for _, name := range []string{coll, "i" + coll} {
				if err := byMessages.ForceAlgorithm(name, algo); err != nil {
					return err
				}
			}
		}
		collCasesOn(b, c, false)
		collCasesOn(b, byMessages, true)

		// Local calls: ReduceLocal, user ops, Alloc.
		f := func(k int) []float64 { return make([]float64, k) }
		b.bad("ReduceLocal of different lengths", gompj.ErrArg, func() error { return gompj.ReduceLocal(f(2), f(3), gompj.Sum) })
		b.bad("ReduceLocal of different types", gompj.ErrType, func() error { return gompj.ReduceLocal(f(2), make([]int, 2), gompj.Sum) })
		b.bad("ReduceLocal with the zero Op", gompj.ErrOp, func() error { return gompj.ReduceLocal(f(2), f(2), gompj.Op{}) })
		b.bad("ReduceLocal of bools by Sum", gompj.ErrOp, func() error { return gompj.ReduceLocal(make([]bool, 2), make([]bool, 2), gompj.Sum) })
		b.bad("ReduceLocal into nil", gompj.ErrBuffer, func() error { return gompj.ReduceLocal(f(2), nil, gompj.Sum) })
		b.bad("ReduceLocal of structs", gompj.ErrBuffer, func() error { return gompj.ReduceLocal(make([]badStruct, 1), make([]badStruct, 1), gompj.Sum) })
		var nilFn func(in, inout []float64)
		b.bad("a user op without a function", gompj.ErrOp, func() error { return gompj.ReduceLocal(f(2), f(2), gompj.NewOp(nilFn, true)) })
		b.bad("a user op over structs", gompj.ErrOp, func() error {
			return c.Allreduce(f(2), f(2), gompj.NewOp(func(in, inout []badStruct) {}, true))
		})
		b.ok("ReduceLocal done right", func() error {
			inout := []float64{1, 2}
			if err := gompj.ReduceLocal([]float64{10, 20}, inout, gompj.Sum); err != nil {
				return err
			}
			return badWant("reduce_local", inout, []float64{11, 22})
		})
		for _, k := range []int{-1, math.MinInt, math.MaxInt, math.MaxInt/8 + 1} {
			b.bad(fmt.Sprintf("Alloc of %d", k), gompj.ErrArg, func() error { _, err := gompj.Alloc[float64](c, k); return err }, fmt.Sprint(k))
		}
		b.ok("Free of Go memory", func() error { return gompj.Free(c, make([]float64, 3)) })
		return nil
	})
}

// collCasesOn runs the collective cases on c, in every mode. On message paths, a rank whose buffer does not match
// the root's data is not a case: as the collectives' documentation says, not every mismatch across ranks is
// detected there, and one that is, at a rank inside a tree, ends the job (TestMismatchedBufferInATree).
func collCasesOn(b *badT, c *gompj.Comm, messages bool) {
	me := c.Rank()
	for _, x := range collCases(c.Size(), me) {
		if messages && x.who == byOneConsumed {
			continue
		}
		modes := x.modes
		if modes == nil {
			modes = []collMode{blockingMode, nonblockingMode, persistentMode}
		}
		for _, m := range modes {
			k := colls{c, m}
			name := fmt.Sprintf("%s (%v)", x.name, m)
			if messages {
				name += " by messages"
			}
			switch {
			case x.who == byAll, x.who == byRoot && me == badRoot, (x.who == byOne || x.who == byOneConsumed) && me == badOne:
				b.bad(name, x.class, func() error { return x.bad(k) }, x.mention...)
			case x.who == byOneConsumed:
				b.ok(name+", the others", func() error { return x.good(k) })
			}
			b.ok(name+", then done right", func() error { return x.good(k) })
		}
	}
}

// TestBadInputCommunicators: groups, communicator constructors, freed communicators and intercommunicators.
func TestBadInputCommunicators(t *testing.T) {
	badJob(t, 4, func(b *badT) error {
		c, n, me := b.c, b.c.Size(), b.c.Rank()
		g := c.Group()
		var nilGroup *gompj.Group
		for _, r := range badRanks(n) {
			rs := fmt.Sprint(r)
			b.bad("Incl "+rs, gompj.ErrRank, func() error { _, err := g.Incl([]int{0, r}); return err }, rs)
			b.bad("Excl "+rs, gompj.ErrRank, func() error { _, err := g.Excl([]int{r}); return err }, rs)
			b.bad("RangeIncl first "+rs, gompj.ErrRank, func() error { _, err := g.RangeIncl([][3]int{{r, 0, -1}}); return err }, rs)
			b.bad("RangeExcl last "+rs, gompj.ErrRank, func() error { _, err := g.RangeExcl([][3]int{{0, r, 1}}); return err }, rs)
			b.bad("TranslateRanks "+rs, gompj.ErrRank, func() error { _, err := g.TranslateRanks([]int{r}, g); return err }, rs)
		}
		b.bad("Incl of the nil group", gompj.ErrRank, func() error { _, err := nilGroup.Incl([]int{0}); return err })
		b.bad("Incl twice", gompj.ErrRank, func() error { _, err := g.Incl([]int{1, 1}); return err })
		b.bad("Excl twice", gompj.ErrRank, func() error { _, err := g.Excl([]int{2, 0, 2}); return err })
		for _, rg := range [][3]int{{0, 2, 0}, {2, 0, 1}, {0, 2, -1}, {0, 3, 2}, {1, 1, 1}, {1, 3, math.MaxInt}, {1, 3, math.MaxInt - 1},
			{2, 0, math.MinInt}, {3, 1, -math.MaxInt}} {
			rs := fmt.Sprint(rg)
			var class error = gompj.ErrRank
			if rg == [3]int{0, 3, 2} || rg == [3]int{1, 1, 1} || rg[2] == math.MaxInt || rg[2] == math.MaxInt-1 || rg[2] <= -math.MaxInt {
				// legal ranges (0 2; 1; a stride past the last rank lists the first alone): used twice, they repeat
				b.ok("RangeIncl "+rs, func() error { _, err := g.RangeIncl([][3]int{rg}); return err })
				b.bad("RangeIncl twice "+rs, class, func() error { _, err := g.RangeIncl([][3]int{rg, rg}); return err })
				continue
			}
			b.bad("RangeIncl "+rs, class, func() error { _, err := g.RangeIncl([][3]int{rg}); return err })
			b.bad("RangeExcl "+rs, class, func() error { _, err := g.RangeExcl([][3]int{rg}); return err })
		}

		// Split: a negative color other than Undefined.
		for _, color := range []int{-1, -5, math.MinInt} {
			b.bad(fmt.Sprintf("Split color %d", color), gompj.ErrArg, func() error { _, err := c.Split(color, 0); return err }, fmt.Sprint(color))
		}
		var half *gompj.Comm
		b.ok("Split done right", func() (err error) {
			if half, err = c.Split(me%2, -me); err == nil && (half.Size() != n/2 || half.Rank() != n/2-1-me/2) {
				err = fmt.Errorf("rank %d of %d", half.Rank(), half.Size())
			}
			return
		})
		if half == nil {
			return nil
		}
		// half's ranks are in reverse order (key -me): as local communicators of an intercommunicator, their
		// leaders (rank 0) are ranks n-2 (even) and n-1 (odd) of c.
		rl, myLeader := n-1-me%2, n-2+me%2
		leaderSays := func(what int) []string {
			if me == myLeader {
				return []string{fmt.Sprint(what)}
			}
			return nil
		}
		// Create and CreateGroup with a group that is not a subgroup, or a caller outside it, or a bad tag.
		b.bad("Create with members outside", gompj.ErrGroup, func() error { _, err := half.Create(g); return err })
		for _, tag := range badTags {
			b.bad(fmt.Sprintf("CreateGroup tag %d", tag), gompj.ErrTag, func() error { _, err := c.CreateGroup(g, tag); return err }, fmt.Sprint(tag))
		}
		b.bad("CreateGroup with members outside", gompj.ErrGroup, func() error { _, err := half.CreateGroup(g, 0); return err })
		b.bad("CreateGroup outside the group", gompj.ErrGroup, func() error {
			others, _ := g.Excl([]int{me})
			_, err := c.CreateGroup(others, 0)
			return err
		})
		b.ok("Create done right", func() error {
			sub, err := half.Create(half.Group())
			if err == nil && sub.Compare(half) != gompj.Congruent {
				err = fmt.Errorf("Compare: %v", sub.Compare(half))
			}
			if err == nil {
				err = sub.Free()
			}
			return err
		})
		b.ok("Create of the empty group", func() error {
			if sub, err := c.Create(nilGroup); err != nil || sub != nil {
				return fmt.Errorf("%v, %v; want nil, nil", sub, err)
			}
			return nil
		})

		// A freed communicator: every call is ErrComm, and a persistent request made on it cannot start.
		var d *gompj.Comm
		var pr *gompj.Request
		b.ok("Dup", func() (err error) { d, err = c.Dup(); return })
		if d == nil {
			return nil
		}
		b.ok("RecvInit on the dup", func() (err error) { pr, err = d.RecvInit(make([]int, 1), me, 0); return })
		b.ok("Free the dup", d.Free)
		x := []int{1}
		freed := map[string]func() error{
			"Free":      d.Free,
			"Send":      func() error { return d.Send(x, me, 0) },
			"Isend":     func() error { return reqErr(d.Isend(x, me, 0)) },
			"Recv":      func() error { _, err := d.Recv(x, me, 0); return err },
			"Irecv":     func() error { return reqErr(d.Irecv(x, me, 0)) },
			"Iprobe":    func() error { _, _, err := d.Iprobe(gompj.AnySource, gompj.AnyTag); return err },
			"Sendrecv":  func() error { _, err := d.Sendrecv(x, me, 0, x, me, 0); return err },
			"SendInit":  func() error { return reqErr(d.SendInit(x, me, 0)) },
			"Barrier":   d.Barrier,
			"Bcast":     func() error { return d.Bcast(x, 0) },
			"Allreduce": func() error { return d.Allreduce(x, []int{0}, gompj.Sum) },
			"Ibcast":    func() error { return reqErr(d.Ibcast(x, 0)) },
			"BcastInit": func() error { return reqErr(d.BcastInit(x, 0)) },
			"Dup":       func() error { _, err := d.Dup(); return err },
			"Split":     func() error { _, err := d.Split(0, 0); return err },
			"Create":    func() error { _, err := d.Create(g); return err },
			"CartCreate": func() error {
				_, err := d.CartCreate([]int{n}, nil, false)
				return err
			},
			"IntercommCreate": func() error { _, err := d.IntercommCreate(0, c, 0, 0); return err },
			"Start of a request made on it": func() error {
				if pr == nil {
					return gompj.ErrComm
				}
				return pr.Start()
			},
		}
		for _, name := range slices.Sorted(maps.Keys(freed)) {
			b.bad(name+" on a freed communicator", gompj.ErrComm, freed[name])
		}
		if pr != nil {
			b.ok("Free the request of the freed communicator", pr.Free)
		}
		// A nil communicator (what Split with Undefined gives the ranks it leaves out): every call is ErrComm.
		var none *gompj.Comm
		b.ok("Split with Undefined", func() (err error) {
			if none, err = c.Split(gompj.Undefined, 0); err == nil && none != nil {
				err = fmt.Errorf("got a communicator of %d ranks", none.Size())
			}
			return
		})
		nilCalls := map[string]func() error{
			"Free":              none.Free,
			"Send":              func() error { return none.Send(x, 0, 0) },
			"Isend":             func() error { return reqErr(none.Isend(x, 0, 0)) },
			"Recv":              func() error { _, err := none.Recv(x, 0, 0); return err },
			"Irecv":             func() error { return reqErr(none.Irecv(x, 0, 0)) },
			"Probe":             func() error { _, err := none.Probe(0, 0); return err },
			"Iprobe":            func() error { _, _, err := none.Iprobe(0, 0); return err },
			"Mprobe":            func() error { _, _, err := none.Mprobe(0, 0); return err },
			"Sendrecv":          func() error { _, err := none.Sendrecv(x, 0, 0, x, 0, 0); return err },
			"SendInit":          func() error { return reqErr(none.SendInit(x, 0, 0)) },
			"RecvInit":          func() error { return reqErr(none.RecvInit(x, 0, 0)) },
			"Bsend":             func() error { return none.Bsend(x, 0, 0) },
			"Barrier":           none.Barrier,
			"Bcast":             func() error { return none.Bcast(x, 0) },
			"Allreduce":         func() error { return none.Allreduce(x, []int{0}, gompj.Sum) },
			"Gather":            func() error { return none.Gather(x, []int{0}, 0) },
			"Ibarrier":          func() error { return reqErr(none.Ibarrier()) },
			"Iallreduce":        func() error { return reqErr(none.Iallreduce(x, []int{0}, gompj.Sum)) },
			"BcastInit":         func() error { return reqErr(none.BcastInit(x, 0)) },
			"Dup":               func() error { _, err := none.Dup(); return err },
			"Split":             func() error { _, err := none.Split(0, 0); return err },
			"Create":            func() error { _, err := none.Create(g); return err },
			"CartCreate":        func() error { _, err := none.CartCreate([]int{1}, nil, false); return err },
			"CartShift":         func() error { _, _, err := none.CartShift(0, 1); return err },
			"Neighbors":         func() error { _, _, err := none.Neighbors(); return err },
			"NeighborAllgather": func() error { return none.NeighborAllgather(x, x) },
			"IntercommCreate":   func() error { _, err := none.IntercommCreate(0, c, 0, 0); return err },
			"Merge":             func() error { _, err := none.Merge(false); return err },
			"BufferAttach":      func() error { return none.BufferAttach(make([]byte, 64)) },
			"Alloc":             func() error { _, err := gompj.Alloc[float64](none, 1); return err },
			"ForceAlgorithm":    func() error { return none.ForceAlgorithm("bcast", "binomial") },
		}
		for _, name := range slices.Sorted(maps.Keys(nilCalls)) {
			b.bad(name+" on a nil communicator", gompj.ErrComm, nilCalls[name])
		}

		// The peer of IntercommCreate may be freed too: the leader sees it, and its group fails with it.
		b.bad("IntercommCreate with a freed peer", gompj.ErrComm, func() error { _, err := half.IntercommCreate(0, d, rl, 5); return err })

		// Intercommunicators: wrong leaders and tags fail on both sides; then a correct one works. The leader's
		// error names what was wrong; its group hears the class from it.
		for _, ll := range append(badRanks(n/2), gompj.ProcNull) {
			b.bad(fmt.Sprintf("IntercommCreate local leader %d", ll), gompj.ErrRank, func() error {
				_, err := half.IntercommCreate(ll, c, rl, 5)
				return err
			}, fmt.Sprint(ll))
		}
		for _, bad := range append(badRanks(n), gompj.ProcNull, gompj.AnySource, myLeader) {
			b.bad(fmt.Sprintf("IntercommCreate remote leader %d", bad), gompj.ErrRank, func() error {
				_, err := half.IntercommCreate(0, c, bad, 5)
				return err
			}, leaderSays(bad)...)
		}
		for _, tag := range append(badTags, gompj.AnyTag) {
			b.bad(fmt.Sprintf("IntercommCreate tag %d", tag), gompj.ErrTag, func() error {
				_, err := half.IntercommCreate(0, c, rl, tag)
				return err
			}, leaderSays(tag)...)
		}
		b.bad("IntercommCreate with a nil peer", gompj.ErrComm, func() error { _, err := half.IntercommCreate(0, nil, rl, 5); return err })
		var ic *gompj.Comm
		b.ok("IntercommCreate done right", func() (err error) { ic, err = half.IntercommCreate(0, c, rl, 5); return })
		if ic == nil {
			return nil
		}
		rn := ic.RemoteSize()
		for _, r := range badRanks(rn) {
			b.bad(fmt.Sprintf("Send on the intercommunicator to %d", r), gompj.ErrRank, func() error { return ic.Send(x, r, 0) }, fmt.Sprint(r))
			b.bad(fmt.Sprintf("Recv on the intercommunicator from %d", r), gompj.ErrRank, func() error { _, err := ic.Recv(x, r, 0); return err }, fmt.Sprint(r))
		}
		for name, f := range map[string]func() error{
			"Scan":            func() error { return ic.Scan(x, []int{0}, gompj.Sum) },
			"Exscan":          func() error { return ic.Exscan(x, []int{0}, gompj.Sum) },
			"Ibcast":          func() error { return reqErr(ic.Ibcast(x, 0)) },
			"AllreduceInit":   func() error { return reqErr(ic.AllreduceInit(x, []int{0}, gompj.Sum)) },
			"Split":           func() error { _, err := ic.Split(0, 0); return err },
			"Create":          func() error { _, err := ic.Create(ic.Group()); return err },
			"CreateGroup":     func() error { _, err := ic.CreateGroup(ic.Group(), 0); return err },
			"IntercommCreate": func() error { _, err := ic.IntercommCreate(0, c, 0, 0); return err },
			"CartCreate":      func() error { _, err := ic.CartCreate([]int{1}, nil, false); return err },
		} {
			b.bad(name+" on an intercommunicator", oneOf{gompj.ErrComm, gompj.ErrTopology}, f)
		}
		// Rooted collectives on it: a root must be Root, ProcNull (the root's group) or a remote rank.
		for _, r := range []int{-4, rn, 1 << 40, gompj.AnySource} {
			b.bad(fmt.Sprintf("Bcast on the intercommunicator, root %d", r), gompj.ErrRoot, func() error { return ic.Bcast([]int{0}, r) })
		}
		b.bad("Allreduce in place on the intercommunicator", oneOf{gompj.ErrArg, gompj.ErrBuffer}, func() error { return ic.Allreduce(gompj.InPlace, []int{0}, gompj.Sum) })
		b.ok("Bcast on the intercommunicator done right", func() error {
			buf := []int{-1}
			root := 0 // group 1 passes the root's rank in group 0
			if me%2 == 0 {
				root = gompj.ProcNull
				if ic.Rank() == 0 {
					root, buf[0] = gompj.Root, 77
				}
			}
			if err := ic.Bcast(buf, root); err != nil {
				return err
			}
			if me%2 == 1 && buf[0] != 77 {
				return fmt.Errorf("got %v", buf)
			}
			return nil
		})
		b.ok("Allreduce on the intercommunicator done right", func() error {
			got := []int{0}
			if err := ic.Allreduce([]int{me}, got, gompj.Sum); err != nil {
				return err
			}
			want := 0
			for r := 1 - me%2; r < n; r += 2 {
				want += r
			}
			if got[0] != want {
				return fmt.Errorf("got %d, want the other group's sum %d", got[0], want)
			}
			return nil
		})
		b.ok("Merge", func() error {
			m, err := ic.Merge(me%2 == 1)
			if err == nil && m.Size() != n {
				err = fmt.Errorf("size %d", m.Size())
			}
			return err
		})
		b.quiet("after the communicators", c)
		return nil
	})
}

// reqErr is the error of a call that returns a request: exactly one of them must be nil.
func reqErr(r *gompj.Request, err error) error {
	if err == nil && r == nil {
		return errors.New("nil request and nil error")
	}
	if err != nil && r != nil {
		return fmt.Errorf("a request with the error %w", err)
	}
	return err
}

// TestBadInputTopologies: DimsCreate, the topology constructors (which must fail on every rank alike), the
// queries on a grid, on a communicator without the topology they need, and the neighbourhood collectives.
func TestBadInputTopologies(t *testing.T) {
	badJob(t, 4, func(b *badT) error {
		c, n, me := b.c, b.c.Size(), b.c.Rank()
		for _, x := range []struct {
			nnodes int
			dims   []int
			class  error
		}{
			{0, []int{0}, gompj.ErrArg}, {-5, []int{0}, gompj.ErrArg}, {math.MinInt, []int{0}, gompj.ErrArg},
			{6, []int{-1, 0}, gompj.ErrDims}, {7, []int{2, 0}, gompj.ErrDims}, {6, []int{4, 0}, gompj.ErrDims},
			{6, nil, gompj.ErrDims}, {6, []int{2, 2}, gompj.ErrDims}, {6, []int{1 << 40, 1 << 40, 0}, gompj.ErrDims},
			{math.MaxInt, []int{math.MaxInt, 2, 0}, gompj.ErrDims},
		} {
			b.bad(fmt.Sprintf("DimsCreate(%d, %v)", x.nnodes, x.dims), x.class, func() error { _, err := gompj.DimsCreate(x.nnodes, x.dims); return err })
		}
		// Large node counts are factored quickly: math.MaxInt used to loop for ever (d*d overflowed).
		for _, x := range []struct{ nnodes, k int }{{math.MaxInt, 2}, {math.MaxInt, 5}, {1 << 62, 3}, {2147483647, 2}, {12, 2}} {
			b.ok(fmt.Sprintf("DimsCreate(%d) in %d dims", x.nnodes, x.k), func() error {
				dims, err := gompj.DimsCreate(x.nnodes, make([]int, x.k))
				if err != nil {
					return err
				}
				p := 1
				for i, d := range dims {
					if d < 1 || p > x.nnodes/d || (i > 0 && d > dims[i-1]) {
						return fmt.Errorf("got %v", dims)
					}
					p *= d
				}
				if p != x.nnodes {
					return fmt.Errorf("got %v", dims)
				}
				return nil
			})
		}

		// Constructors: arguments that are bad everywhere, that differ between ranks, or bad on one rank only:
		// every rank fails, none waits.
		carts := []struct {
			name    string
			dims    func() []int
			periods []bool
			class   error
		}{
			{"too many ranks", func() []int { return []int{n + 1} }, nil, gompj.ErrDims},
			{"a zero extent", func() []int { return []int{0} }, nil, gompj.ErrDims},
			{"a negative extent", func() []int { return []int{2, -2} }, nil, gompj.ErrDims},
			{"a grid that overflows", func() []int { return []int{1 << 32, 1 << 32} }, nil, gompj.ErrDims},
			{"periods of another length", func() []int { return []int{n} }, []bool{true, true}, gompj.ErrDims},
			{"dims differing by rank", func() []int { return []int{1 + me%2} }, nil, gompj.ErrArg},
			{"bad dims on one rank", func() []int {
				if me == badOne {
					return []int{-1}
				}
				return []int{n}
			}, nil, oneOf{gompj.ErrArg, gompj.ErrDims}},
		}
		for _, x := range carts {
			b.bad("CartCreate with "+x.name, x.class, func() error { _, err := c.CartCreate(x.dims(), x.periods, false); return err })
		}
		b.bad("CartCreate with periods differing by rank", gompj.ErrArg, func() error {
			_, err := c.CartCreate([]int{n}, []bool{me%2 == 0}, false)
			return err
		})
		var grid *gompj.Comm
		b.ok("CartCreate done right", func() (err error) { grid, err = c.CartCreate([]int{2, 2}, []bool{true, false}, false); return })
		if grid == nil {
			return nil
		}
		for _, dim := range []int{-1, 2, math.MaxInt, math.MinInt} {
			b.bad(fmt.Sprintf("CartShift along %d", dim), gompj.ErrDims, func() error { _, _, err := grid.CartShift(dim, 1); return err }, fmt.Sprint(dim))
		}
		for _, disp := range []int{math.MaxInt, math.MinInt, 1 << 40, -(1 << 40)} {
			b.ok(fmt.Sprintf("CartShift by %d", disp), func() error {
				for dim := 0; dim < 2; dim++ {
					src, dst, err := grid.CartShift(dim, disp)
					if err != nil {
						return err
					}
					for _, r := range []int{src, dst} {
						if r != gompj.ProcNull && (r < 0 || r >= n) {
							return fmt.Errorf("dimension %d: rank %d", dim, r)
						}
					}
				}
				return nil
			})
		}
		for _, coords := range [][]int{{0}, {0, 0, 0}, nil} {
			b.bad(fmt.Sprintf("CartRank(%v)", coords), gompj.ErrDims, func() error { _, err := grid.CartRank(coords); return err })
		}
		for _, coords := range [][]int{{0, 2}, {0, -1}, {1, math.MaxInt}, {0, math.MinInt}} {
			b.bad(fmt.Sprintf("CartRank(%v)", coords), gompj.ErrRank, func() error { _, err := grid.CartRank(coords); return err })
		}
		for _, coords := range [][]int{{math.MinInt, 0}, {math.MaxInt, 1}, {-3, 1}} {
			b.ok(fmt.Sprintf("CartRank(%v) wraps", coords), func() error {
				r, err := grid.CartRank(coords)
				if err == nil && (r < 0 || r >= n) {
					err = fmt.Errorf("rank %d", r)
				}
				return err
			})
		}
		for _, r := range append(badRanks(n), gompj.ProcNull, gompj.AnySource) {
			b.bad(fmt.Sprintf("CartCoords(%d)", r), gompj.ErrRank, func() error { _, err := grid.CartCoords(r); return err }, fmt.Sprint(r))
		}
		b.bad("CartSub with too few flags", gompj.ErrDims, func() error { _, err := grid.CartSub([]bool{true}); return err })
		b.bad("CartSub differing by rank", gompj.ErrArg, func() error { _, err := grid.CartSub([]bool{me%2 == 0, true}); return err })
		b.bad("GraphGet of a grid", gompj.ErrTopology, func() error { _, _, err := grid.GraphGet(); return err })
		b.ok("CartSub done right", func() error {
			row, err := grid.CartSub([]bool{false, true})
			if err == nil && row.Size() != 2 {
				err = fmt.Errorf("size %d", row.Size())
			}
			return err
		})
		// Queries and neighbourhood collectives on a communicator without the topology they need.
		x := []float64{1}
		for name, f := range map[string]func() error{
			"CartShift":             func() error { _, _, err := c.CartShift(0, 1); return err },
			"CartRank":              func() error { _, err := c.CartRank([]int{0}); return err },
			"CartCoords":            func() error { _, err := c.CartCoords(0); return err },
			"CartGet":               func() error { _, _, _, err := c.CartGet(); return err },
			"CartSub":               func() error { _, err := c.CartSub([]bool{true}); return err },
			"GraphGet":              func() error { _, _, err := c.GraphGet(); return err },
			"Neighbors":             func() error { _, _, err := c.Neighbors(); return err },
			"NeighborAllgather":     func() error { return c.NeighborAllgather(x, make([]float64, 2)) },
			"NeighborAlltoallv":     func() error { return c.NeighborAlltoallv(x, nil, nil, x, nil, nil) },
			"IneighborAlltoall":     func() error { return reqErr(c.IneighborAlltoall(x, x)) },
			"NeighborAllgatherInit": func() error { return reqErr(c.NeighborAllgatherInit(x, x)) },
		} {
			b.bad(name+" without a topology", gompj.ErrTopology, f)
		}

		// Graphs.
		ringIndex := []int{2, 4, 6, 8}[:n]
		ringEdges := []int{}
		for r := 0; r < n; r++ {
			ringEdges = append(ringEdges, (r+n-1)%n, (r+1)%n)
		}
		for _, g := range []struct {
			name         string
			index, edges []int
			class        error
		}{
			{"more nodes than ranks", make([]int, n+1), nil, gompj.ErrArg},
			{"a decreasing index", []int{2, 1, 4, 4}, []int{1, 0, 3, 2}, gompj.ErrArg},
			{"a negative index", []int{-1, 0, 0, 0}, nil, gompj.ErrArg},
			{"an index past the edges", ringIndex, ringEdges[:5], gompj.ErrArg},
			{"an edge out of range", []int{1, 2, 3, 4}, []int{1, 2, 3, n}, gompj.ErrRank},
			{"a negative edge", []int{1, 2, 3, 4}, []int{1, 2, 3, -1}, gompj.ErrRank},
			{"edges differing by rank", []int{1, 2, 3, 4}, []int{1 + me%2, 2, 3, 0}, gompj.ErrArg},
		} {
			b.bad("GraphCreate with "+g.name, g.class, func() error { _, err := c.GraphCreate(g.index, g.edges, false); return err })
		}
		b.ok("GraphCreate done right", func() error {
			gc, err := c.GraphCreate(ringIndex, ringEdges, false)
			if err == nil {
				var srcs []int
				if srcs, _, err = gc.Neighbors(); err == nil && !slices.Equal(srcs, []int{(me + n - 1) % n, (me + 1) % n}) {
					err = fmt.Errorf("neighbours %v", srcs)
				}
			}
			return err
		})
		left, right := (me+n-1)%n, (me+1)%n
		for _, d := range []struct {
			name       string
			srcs, dsts []int
			class      error
		}{
			{"a source out of range", []int{left, n}, []int{right}, gompj.ErrRank},
			{"a negative destination", []int{left}, []int{right, -1}, gompj.ErrRank},
			{"ProcNull as a source", []int{left, gompj.ProcNull}, []int{right}, gompj.ErrRank},
			{"lists that do not match", []int{left}, []int{right, right}, gompj.ErrTopology},
			{"a rank missing from a source list", []int{}, []int{right}, gompj.ErrTopology},
		} {
			b.bad("DistGraphCreateAdjacent with "+d.name, d.class, func() error { _, err := c.DistGraphCreateAdjacent(d.srcs, d.dsts, false); return err })
		}
		b.bad("DistGraphCreateAdjacent bad on one rank", oneOf{gompj.ErrArg, gompj.ErrRank}, func() error {
			srcs := []int{left}
			if me == badOne {
				srcs = []int{1 << 40}
			}
			_, err := c.DistGraphCreateAdjacent(srcs, []int{right}, false)
			return err
		})
		b.bad("DistGraphCreateAdjacent with reorder differing by rank", gompj.ErrArg, func() error {
			_, err := c.DistGraphCreateAdjacent([]int{left}, []int{right}, me == 0)
			return err
		})
		var ring *gompj.Comm
		b.ok("DistGraphCreateAdjacent done right", func() (err error) {
			ring, err = c.DistGraphCreateAdjacent([]int{left, right}, []int{left, right}, false)
			return
		})
		if ring == nil {
			return nil
		}

		// Neighbourhood collectives on the ring (sources and destinations: left, right), in each mode, by the
		// default algorithm (shared memory on one node) and by messages (as across nodes).
		ringP2P, err := ring.Dup()
		if err != nil {
			return err
		}
		for _, coll := range []string{"neighbor_allgather", "neighbor_allgatherv", "neighbor_alltoall", "neighbor_alltoallv"} {
			if err := ringP2P.ForceAlgorithm(coll, "p2p"); err != nil {
				return err
			}
		}
		const m = 3
		f := func(k int) []float64 { return make([]float64, k) }
		mk := func(mode collMode) nbrs { return nbrs{ring, mode} }
		allgather := func(k nbrs) error {
			recv := f(2 * m)
			if err := k.Allgather(badFill(me, m), recv); err != nil {
				return err
			}
			return badWant("neighbor allgather", recv, append(badFill(left, m), badFill(right, m)...))
		}
		alltoallv := func(k nbrs) error { // 1 element to the left, 2 to the right
			send := append(badFill(me*10, 1), badFill(me*10+1, 2)...)
			recv := f(3)
			if err := k.Alltoallv(send, []int{1, 2}, nil, recv, []int{2, 1}, []int{1, 0}); err != nil {
				return err
			}
			// from the left neighbour its 2 (into recv[1:3]), from the right its 1 (into recv[0:1])
			return badWant("neighbor alltoallv", recv, append(badFill(right*10, 1), badFill(left*10+1, 2)...))
		}
		anyBuf := oneOf{gompj.ErrBuffer, gompj.ErrArg}
		big := math.MaxInt/2 + 2 // a count and a displacement whose sum overflows
		huge := []int{big, big}
		cases := []collCaseN{
			{"NeighborAllgather into a short buffer", byAll, gompj.ErrTruncate, func(k nbrs) error { return k.Allgather(f(m), f(2*m-1)) }, allgather, false},
			{"NeighborAllgather into another type", byAll, gompj.ErrType, func(k nbrs) error { return k.Allgather(f(m), make([]int32, 2*m)) }, allgather, false},
			{"NeighborAllgather of a chan", byAll, gompj.ErrBuffer, func(k nbrs) error { return k.Allgather(make(chan int), f(2*m)) }, allgather, false},
			{"NeighborAllgather into nil", byAll, gompj.ErrBuffer, func(k nbrs) error { return k.Allgather(f(m), nil) }, allgather, false},
			{"NeighborAllgather in place", byAll, anyBuf, func(k nbrs) error { return k.Allgather(gompj.InPlace, f(2*m)) }, allgather, false},
			{"NeighborAlltoall of a send not divisible", byAll, gompj.ErrArg, func(k nbrs) error { return k.Alltoall(f(2*m+1), f(2*m+1)) }, allgather, false},
			{"NeighborAlltoall into a short buffer", byAll, gompj.ErrTruncate, func(k nbrs) error { return k.Alltoall(f(2*m), f(2*m-1)) }, allgather, false},
			{"NeighborAllgatherv with too few counts", byAll, gompj.ErrArg, func(k nbrs) error { return k.Allgatherv(f(m), f(2*m), []int{m}, nil) }, allgather, false},
			{"NeighborAllgatherv with a negative count", byAll, gompj.ErrArg, func(k nbrs) error { return k.Allgatherv(f(m), f(2*m), []int{m, -1}, nil) }, allgather, false},
			{"NeighborAllgatherv with a block past the buffer", byAll, gompj.ErrTruncate, func(k nbrs) error { return k.Allgatherv(f(m), f(2*m), []int{m, m}, []int{0, m + 1}) }, allgather, false},
			{"NeighborAllgatherv with a huge displacement", byAll, oneOf{gompj.ErrTruncate, gompj.ErrArg}, func(k nbrs) error {
				return k.Allgatherv(f(m), f(2*m), []int{m, big}, huge)
			}, allgather, false},
			{"NeighborAlltoallv with too many send counts", byAll, gompj.ErrArg, func(k nbrs) error { return k.Alltoallv(f(3), []int{1, 1, 1}, nil, f(3), []int{1, 1}, nil) }, alltoallv, false},
			{"NeighborAlltoallv with a negative receive displacement", byAll, gompj.ErrArg, func(k nbrs) error { return k.Alltoallv(f(3), []int{1, 1}, nil, f(3), []int{1, 1}, []int{0, -1}) }, alltoallv, false},
			{"NeighborAlltoallv with a huge send count", byAll, oneOf{gompj.ErrTruncate, gompj.ErrArg}, func(k nbrs) error {
				return k.Alltoallv(f(3), []int{big, big}, huge, f(3), []int{1, 1}, nil)
			}, alltoallv, false},
			{"NeighborAlltoallv with send and receive of other types", byAll, gompj.ErrType, func(k nbrs) error { return k.Alltoallv(f(2), []int{1, 1}, nil, make([]int64, 2), []int{1, 1}, nil) }, alltoallv, false},
			// What a neighbour sends does not fit, or is of another type, on one rank: it fails there, and the
			// exchange is done with.
			{"NeighborAllgather into short blocks on one rank", byOneConsumed, gompj.ErrTruncate, func(k nbrs) error { return k.Allgatherv(badFill(me, m), f(2*m), []int{m - 1, m - 1}, nil) }, allgather, false},
			// Of another type on one rank: its neighbours receive its blocks, and fail too.
			{"NeighborAllgather of another type on one rank", byOneConsumed, gompj.ErrType, func(k nbrs) error { return k.Allgather(make([]float32, m), make([]float32, 2*m)) }, allgather, true},
		}
		for _, x := range cases {
			for i, mode := range []collMode{blockingMode, nonblockingMode, persistentMode, blockingMode, nonblockingMode, persistentMode} {
				k := mk(mode)
				name := fmt.Sprintf("%s (%v)", x.name, mode)
				if i >= 3 {
					k.c, name = ringP2P, name+" by messages"
				}
				switch {
				case x.who == byAll, (x.who == byOne || x.who == byOneConsumed) && me == badOne:
					b.bad(name, x.class, func() error { return x.bad(k) })
				case x.who == byOneConsumed && x.peersFail && (me == (badOne+1)%n || me == (badOne+n-1)%n):
					b.bad(name+", its neighbours", x.class, func() error { return x.good(k) })
				case x.who == byOneConsumed:
					b.ok(name+", the others", func() error { return x.good(k) })
				}
				b.ok(name+", then done right", func() error { return x.good(k) })
			}
		}
		return nil
	})
}

type collCaseN struct {
	name      string
	who       int
	class     error
	bad       func(k nbrs) error
	good      func(k nbrs) error
	peersFail bool // byOneConsumed: the bad rank's neighbours fail too
}

// nbrs calls the neighbourhood collectives of c in mode m.
type nbrs struct {
	c *gompj.Comm
	m collMode
}

func (k nbrs) Allgather(send, recv any) error {
	c := k.c
	return colls{c, k.m}.run(func() error { return c.NeighborAllgather(send, recv) },
		func() (*gompj.Request, error) { return c.IneighborAllgather(send, recv) },
		func() (*gompj.Request, error) { return c.NeighborAllgatherInit(send, recv) })
}

func (k nbrs) Allgatherv(send, recv any, counts, displs []int) error {
	c := k.c
	return colls{c, k.m}.run(func() error { return c.NeighborAllgatherv(send, recv, counts, displs) },
		func() (*gompj.Request, error) { return c.IneighborAllgatherv(send, recv, counts, displs) },
		func() (*gompj.Request, error) { return c.NeighborAllgathervInit(send, recv, counts, displs) })
}

func (k nbrs) Alltoall(send, recv any) error {
	c := k.c
	return colls{c, k.m}.run(func() error { return c.NeighborAlltoall(send, recv) },
		func() (*gompj.Request, error) { return c.IneighborAlltoall(send, recv) },
		func() (*gompj.Request, error) { return c.NeighborAlltoallInit(send, recv) })
}

func (k nbrs) Alltoallv(send any, sc, sd []int, recv any, rc, rd []int) error {
	c := k.c
	return colls{c, k.m}.run(func() error { return c.NeighborAlltoallv(send, sc, sd, recv, rc, rd) },
		func() (*gompj.Request, error) { return c.IneighborAlltoallv(send, sc, sd, recv, rc, rd) },
		func() (*gompj.Request, error) { return c.NeighborAlltoallvInit(send, sc, sd, recv, rc, rd) })
}

// TestBadInputViews: views that reach past their slice (or before it), with negative counts, lists of different
// lengths, over what is not a slice of a primitive type; receives into views whose blocks overlap; then views done
// right move the right elements.
func TestBadInputViews(t *testing.T) {
	badJob(t, 2, func(b *badT) error {
		c, me := b.c, b.c.Rank()
		other := 1 - me
		buf := make([]float64, 10)
		for _, v := range []struct {
			name  string
			class error
			make  func() (*gompj.View, error)
		}{
			{"Vector of -1 blocks", gompj.ErrArg, func() (*gompj.View, error) { return gompj.Vector(buf, -1, 1, 1) }},
			{"Vector of blocks of -1", gompj.ErrArg, func() (*gompj.View, error) { return gompj.Vector(buf, 2, -1, 1) }},
			{"Vector past the slice", gompj.ErrBuffer, func() (*gompj.View, error) { return gompj.Vector(buf, 3, 2, 5) }},
			{"Vector of a block past the slice", gompj.ErrBuffer, func() (*gompj.View, error) { return gompj.Vector(buf, 1, 11, 1) }},
			{"Vector before the slice", gompj.ErrBuffer, func() (*gompj.View, error) { return gompj.Vector(buf, 2, 1, -1) }},
			{"Vector of a huge stride", gompj.ErrBuffer, func() (*gompj.View, error) { return gompj.Vector(buf, 2, 1, math.MaxInt) }},
			{"Vector of huge blocks", gompj.ErrBuffer, func() (*gompj.View, error) { return gompj.Vector(buf, 1<<40, 1<<40, 1) }},
			{"Vector of more elements than bytes can count", oneOf{gompj.ErrArg, gompj.ErrBuffer}, func() (*gompj.View, error) { return gompj.Vector(buf, 1<<61, 1, 0) }},
			{"Vector over nil", gompj.ErrBuffer, func() (*gompj.View, error) { return gompj.Vector(nil, 1, 1, 1) }},
			{"Vector over a chan", gompj.ErrBuffer, func() (*gompj.View, error) { return gompj.Vector(make(chan int), 1, 1, 1) }},
			{"Vector over structs", gompj.ErrBuffer, func() (*gompj.View, error) { return gompj.Vector(make([]badStruct, 4), 1, 1, 1) }},
			{"Vector over a pointer to a slice", gompj.ErrBuffer, func() (*gompj.View, error) { return gompj.Vector(&buf, 1, 1, 1) }},
			{"Vector over a View", gompj.ErrBuffer, func() (*gompj.View, error) {
				w, err := gompj.Vector(buf, 2, 1, 2)
				if err != nil {
					return nil, err
				}
				return gompj.Vector(w, 1, 1, 1)
			}},
			{"Indexed of lists of different lengths", gompj.ErrArg, func() (*gompj.View, error) { return gompj.Indexed(buf, []int{1, 2}, []int{0}) }},
			{"Indexed of a negative length", gompj.ErrArg, func() (*gompj.View, error) { return gompj.Indexed(buf, []int{-1}, []int{0}) }},
			{"Indexed before the slice", gompj.ErrBuffer, func() (*gompj.View, error) { return gompj.Indexed(buf, []int{1}, []int{-1}) }},
			{"Indexed past the slice", gompj.ErrBuffer, func() (*gompj.View, error) { return gompj.Indexed(buf, []int{2}, []int{9}) }},
			{"Indexed at a huge displacement", gompj.ErrBuffer, func() (*gompj.View, error) { return gompj.Indexed(buf, []int{2}, []int{math.MaxInt}) }},
			{"Indexed of a huge length", gompj.ErrBuffer, func() (*gompj.View, error) { return gompj.Indexed(buf, []int{math.MaxInt}, []int{2}) }},
			{"Indexed over nil", gompj.ErrBuffer, func() (*gompj.View, error) { return gompj.Indexed(nil, []int{1}, []int{0}) }},
			{"Subarray of lists of different lengths", gompj.ErrArg, func() (*gompj.View, error) { return gompj.Subarray(buf, []int{2, 5}, []int{1}, []int{0, 0}) }},
			{"Subarray of a negative extent", gompj.ErrArg, func() (*gompj.View, error) { return gompj.Subarray(buf, []int{2, 5}, []int{-1, 1}, []int{0, 0}) }},
			{"Subarray at a negative start", gompj.ErrArg, func() (*gompj.View, error) { return gompj.Subarray(buf, []int{2, 5}, []int{1, 1}, []int{0, -1}) }},
			{"Subarray leaving the array", gompj.ErrBuffer, func() (*gompj.View, error) { return gompj.Subarray(buf, []int{2, 5}, []int{1, 3}, []int{1, 3}) }},
			{"Subarray at a huge start", gompj.ErrBuffer, func() (*gompj.View, error) {
				return gompj.Subarray(buf, []int{2, 5}, []int{1, 3}, []int{1, math.MaxInt})
			}},
			{"Subarray of an array larger than the slice", gompj.ErrBuffer, func() (*gompj.View, error) { return gompj.Subarray(buf, []int{3, 4}, []int{1, 1}, []int{0, 0}) }},
			{"Subarray of an array that overflows", oneOf{gompj.ErrArg, gompj.ErrBuffer}, func() (*gompj.View, error) {
				return gompj.Subarray(buf, []int{1 << 32, 1 << 32}, []int{1, 1}, []int{0, 0})
			}},
		} {
			b.bad(v.name, v.class, func() error {
				w, err := v.make()
				if w != nil && err != nil {
					return fmt.Errorf("a view with the error %w", err)
				}
				if err == nil {
					return fmt.Errorf("a view of %d elements", w.Len())
				}
				return err
			})
		}

		// Receiving into a View whose blocks overlap is ErrBuffer, before anything moves: the message stays for
		// the receive done right. Sending from one is fine.
		overlap, err := gompj.Indexed(buf, []int{3, 3}, []int{0, 2})
		if err != nil {
			return err
		}
		b.ok("Send from an overlapping View", func() error {
			_, err := c.Sendrecv(overlap, other, 1, make([]float64, 6), other, 1)
			return err
		})
		for name, f := range map[string]func() error{
			"Recv":            func() error { _, err := c.Recv(overlap, other, 2); return err },
			"Irecv":           func() error { return reqErr(c.Irecv(overlap, other, 2)) },
			"RecvInit":        func() error { return reqErr(c.RecvInit(overlap, other, 2)) },
			"Sendrecv":        func() error { _, err := c.Sendrecv([]float64{1}, other, 3, overlap, other, 2); return err },
			"SendrecvReplace": func() error { _, err := c.SendrecvReplace(overlap, other, 3, other, 2); return err },
			"Bcast":           func() error { return c.Bcast(overlap, 0) },
			"Allreduce":       func() error { return c.Allreduce(make([]float64, 6), overlap, gompj.Sum) },
			"Iallgather":      func() error { return reqErr(c.Iallgather(make([]float64, 3), overlap)) },
			// A copy of the handle, which a blocking collective lets stay on this stack: its error must not read
			// it through fmt after the stack moves (it did, with %v: a fault under
			// -d=maymorestack=runtime.mayMoreStackMove with GODEBUG=efence=1).
			"Allreduce, the handle on the stack": func() error {
				h := *overlap
				return c.Allreduce(make([]float64, 6), &h, gompj.Sum)
			},
		} {
			b.bad(name+" into an overlapping View", gompj.ErrBuffer, f, "overlap")
		}
		b.quiet("after the overlapping receives", c)

		// Views done right: a column of a 4x3 matrix to the other rank's row, through every path.
		a := make([]float64, 12)
		for i := range a {
			a[i] = float64(me*100 + i)
		}
		col, err1 := gompj.Vector(a[1:], 4, 1, 3)
		row, err2 := gompj.Subarray(make([]float64, 12), []int{4, 3}, []int{1, 3}, []int{2, 0})
		sel, err3 := gompj.Indexed(make([]float64, 8), []int{2, 2}, []int{6, 0})
		if err := errors.Join(err1, err2, err3); err != nil {
			return err
		}
		want := make([]float64, 4)
		for i := range want {
			want[i] = float64(other*100 + 1 + 3*i)
		}
		b.ok("Sendrecv of views", func() error {
			got := make([]float64, 4)
			if _, err := c.Sendrecv(col, other, 5, got, other, 5); err != nil {
				return err
			}
			return badWant("a column", got, want)
		})
		b.ok("Sendrecv into an Indexed view", func() error {
			if _, err := c.Sendrecv(col, other, 6, sel, other, 6); err != nil {
				return err
			}
			got := make([]float64, 4)
			if _, err := c.Sendrecv(sel, me, 7, got, me, 7); err != nil {
				return err
			}
			return badWant("an indexed selection", got, want)
		})
		b.ok("a view of 3 into a row of 3 is truncated", func() error {
			_, err := c.Sendrecv(col, other, 8, row, other, 8)
			if !errors.Is(err, gompj.ErrTruncate) {
				return fmt.Errorf("%v, want ErrTruncate", err)
			}
			return nil
		})
		b.quiet("after the views", c)
		return nil
	})
}

// TestBadInputRandomized draws arguments at random (a fixed seed, so that a failure repeats) from values near the
// edges (0, ±1, the slice's length, huge, math.MinInt and math.MaxInt) and in range, for the calls whose validity
// a few lines can state: views (which must then move exactly the elements they select), the peers and tags of a
// probe, and the counts and displacements of Allgatherv (the same draws on every rank, so that it fails on all of
// them alike, or succeeds with the right data).
func TestBadInputRandomized(t *testing.T) {
	badJob(t, 3, func(b *badT) error {
		c, n, me := b.c, b.c.Size(), b.c.Rank()
		rng := rand.New(rand.NewSource(20240607))
		const N = 12
		pick := func() int {
			switch rng.Intn(4) {
			case 0:
				return []int{-2, -1, 0, 1, 2, 3, N - 1, N, N + 1}[rng.Intn(9)]
			case 1:
				return []int{math.MinInt, math.MaxInt, math.MaxInt / 2, math.MaxInt/8 + 1, 1 << 40, -(1 << 40)}[rng.Intn(6)]
			}
			return rng.Intn(N + 2)
		}
		buf := make([]float64, N)
		for i := range buf {
			buf[i] = float64(i + 1)
		}
		var arg = errors.New("ErrArg")
		// check compares a view made by the library with the model's verdict: an error class, or the elements.
		check := func(name string, v *gompj.View, err error, wantClass error, want []float64, wantLen int) {
			switch {
			case wantClass == arg && !errors.Is(err, gompj.ErrArg), wantClass == gompj.ErrBuffer && !errors.Is(err, gompj.ErrBuffer):
				b.t.Errorf("rank %d: %s: %v, want %v", me, name, err, wantClass)
			case wantClass == nil && err != nil:
				b.t.Errorf("rank %d: %s: %v, want a view of %v", me, name, err, want)
			case wantClass == nil && v.Len() != wantLen:
				b.t.Errorf("rank %d: %s: a view of %d elements, want %d", me, name, v.Len(), wantLen)
			case wantClass == nil && len(want) == wantLen:
				b.ok(name+": moved", func() error {
					got := make([]float64, len(want))
					if _, err := c.Sendrecv(v, me, 0, got, me, 0); err != nil {
						return err
					}
					return badWant("the view's elements", got, want)
				})
			}
		}
		for i := 0; i < 400; i++ {
			count, blockLen, stride := pick(), pick(), pick()
			name := fmt.Sprintf("Vector(%d, %d, %d)", count, blockLen, stride)
			var want []float64
			var class error
			switch {
			case count < 0 || blockLen < 0:
				class = arg
			case count == 0 || blockLen == 0:
			case count > 1 && stride < 0:
				class = gompj.ErrBuffer
			case blockLen > N || (count > 1 && stride > 0 && count-1 > (N-blockLen)/stride):
				class = gompj.ErrBuffer
			case count > math.MaxInt/8/blockLen:
				class = arg
			default:
				for k := 0; k < count && len(want) <= 4*N; k++ { // beyond, only the length is checked
					want = append(want, buf[k*stride:k*stride+blockLen]...)
				}
			}
			wantLen := 0
			if class == nil && count > 0 && blockLen > 0 {
				wantLen = count * blockLen
			}
			b.at(name)
			v, err := gompj.Vector(buf, count, blockLen, stride)
			check(name, v, err, class, want, wantLen)
		}
		for i := 0; i < 400; i++ {
			k := rng.Intn(4)
			lens, displs := make([]int, k), make([]int, k)
			for j := range lens {
				lens[j], displs[j] = pick(), pick()
			}
			if rng.Intn(8) == 0 {
				displs = append(displs, 0)
			}
			name := fmt.Sprintf("Indexed(%v, %v)", lens, displs)
			var want []float64
			var class error
			if len(lens) != len(displs) {
				class = arg
			}
			total := 0
			for j := 0; class == nil && j < k; j++ {
				l, d := lens[j], displs[j]
				switch {
				case l < 0:
					class = arg
				case l == 0:
				case d < 0 || d > N-l:
					class = gompj.ErrBuffer
				case total > math.MaxInt/8-l:
					class = arg
				default:
					total += l
					want = append(want, buf[d:d+l]...)
				}
			}
			b.at(name)
			v, err := gompj.Indexed(buf, lens, displs)
			check(name, v, err, class, want, len(want))
		}
		for i := 0; i < 400; i++ {
			d := rng.Intn(4)
			sizes, subs, starts := make([]int, d), make([]int, d), make([]int, d)
			for j := range sizes {
				sizes[j], subs[j], starts[j] = pick(), pick(), pick()
				if rng.Intn(2) == 0 { // often in range, so that some are valid
					sizes[j] = 1 + rng.Intn(3)
					subs[j] = rng.Intn(sizes[j] + 1)
					starts[j] = rng.Intn(sizes[j] - subs[j] + 2)
				}
			}
			if rng.Intn(8) == 0 {
				starts = starts[:max(0, d-1)]
			}
			name := fmt.Sprintf("Subarray(%v, %v, %v)", sizes, subs, starts)
			var class error
			if len(starts) != d {
				class = arg
			}
			total := 1
			for j := 0; class == nil && j < d; j++ {
				switch {
				case sizes[j] < 0 || subs[j] < 0 || starts[j] < 0:
					class = arg
				case starts[j] > sizes[j]-subs[j]:
					class = gompj.ErrBuffer
				case sizes[j] > 0 && total > math.MaxInt/sizes[j]:
					class = arg
				default:
					total *= sizes[j]
				}
			}
			if class == nil && total > N {
				class = gompj.ErrBuffer
			}
			var want []float64
			if class == nil {
				// Row-major walk of the sub-array.
				idx := make([]int, d)
				empty := false
				for j := range subs {
					empty = empty || subs[j] == 0
				}
				for !empty {
					off := 0
					for j := 0; j < d; j++ {
						off = off*sizes[j] + starts[j] + idx[j]
					}
					want = append(want, buf[off])
					j := d - 1
					for ; j >= 0; j-- {
						if idx[j]++; idx[j] < subs[j] {
							break
						}
						idx[j] = 0
					}
					if j < 0 {
						break
					}
				}
			}
			b.at(name)
			v, err := gompj.Subarray(buf, sizes, subs, starts)
			check(name, v, err, class, want, len(want))
		}

		// Peers and tags of a probe.
		for i := 0; i < 300; i++ {
			src, tag := pick()-3, pick()-3
			if rng.Intn(3) == 0 {
				src, tag = int(rng.Int63())-math.MaxInt/2, int(rng.Int63())
			}
			var class error
			switch {
			case (src < 0 || src >= n) && src != gompj.AnySource && src != gompj.ProcNull:
				class = gompj.ErrRank
			case (tag < 0 || tag > gompj.MaxTag) && tag != gompj.AnyTag:
				class = gompj.ErrTag
			}
			name := fmt.Sprintf("Iprobe(%d, %d)", src, tag)
			if class == nil {
				b.ok(name, func() error { _, _, err := c.Iprobe(src, tag); return err })
			} else {
				b.bad(name, class, func() error { _, _, err := c.Iprobe(src, tag); return err })
			}
		}

		// Allgatherv with drawn counts and displacements: every rank draws the same (the generator was used alike
		// on every rank so far).
		for i := 0; i < 200; i++ {
			counts, displs := make([]int, n), make([]int, n)
			for r := range counts {
				counts[r], displs[r] = rng.Intn(5), rng.Intn(N)
				if rng.Intn(6) == 0 {
					counts[r] = pick()
				}
				if rng.Intn(6) == 0 {
					displs[r] = pick()
				}
			}
			if rng.Intn(4) == 0 {
				displs = nil
			}
			var class error
			at, cover := 0, make([]int, N)
			for r := 0; class == nil && r < n; r++ {
				d := at
				if displs != nil {
					d = displs[r]
				}
				switch {
				case counts[r] < 0 || d < 0:
					class = gompj.ErrArg
				case d > N || counts[r] > N-d:
					class = gompj.ErrTruncate
				default:
					for j := d; j < d+counts[r]; j++ {
						cover[j]++
					}
				}
				at += max(counts[r], 0)
			}
			name := fmt.Sprintf("Allgatherv(%v, %v)", counts, displs)
			send := badFill(me, max(0, min(counts[me], N)))
			if class != nil {
				b.bad(name, class, func() error { return c.Allgatherv(send, make([]float64, N), counts, displs) })
				continue
			}
			b.ok(name, func() error {
				recv := make([]float64, N)
				if err := c.Allgatherv(send, recv, counts, displs); err != nil {
					return err
				}
				at := 0
				for r := 0; r < n; r++ {
					d := at
					if displs != nil {
						d = displs[r]
					}
					at += counts[r]
					for j := 0; j < counts[r]; j++ {
						if cover[d+j] == 1 && recv[d+j] != badVal(r, j) { // overlapping blocks: either may win
							return fmt.Errorf("element %d: %v, want rank %d's %v", d+j, recv[d+j], r, badVal(r, j))
						}
					}
				}
				return nil
			})
		}
		b.quiet("after the drawn calls", c)
		return nil
	})
}

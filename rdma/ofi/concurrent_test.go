//go:build ofi

package ofi

import (
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/gompj/gompj/rdma"
)

// skipShmTagged skips what libfabric 1.17's shm gets wrong with FI_TAGGED: tagged messages that arrive before
// their receive is posted are lost (this test shows it: from one sender, messages 128 to 1023 of a flood never
// complete). Open takes FI_MSG on shm unless FI_TAGGED is asked for.
func skipShmTagged(t *testing.T, fc fabricCase) {
	if fc.prov == "shm" && fc.api == "tagged" {
		t.Skip("libfabric 1.17's shm loses unexpected tagged messages")
	}
}

// TestConcurrentSenders: as in the device, every endpoint is polled on a goroutine of its own while two
// goroutines per sending node inject to node 0 (taking turns, as the device's per-peer lock makes them), far more
// than node 0 has receives posted. Every message arrives, in each sender's order.
func TestConcurrentSenders(t *testing.T) {
	eachFabric(t, func(t *testing.T, fc fabricCase) {
		skipShmTagged(t, fc)
		nodes := openJob(t, fc, 3, Options{})
		const count = 3000
		var mu sync.Mutex // the pollers' and the test's view of node 0's receipts
		stop := make(chan struct{})
		var pollers sync.WaitGroup
		for _, x := range nodes {
			pollers.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					mu.Lock()
					x.poll()
					mu.Unlock()
				}
			})
		}
		var senders sync.WaitGroup
		errs := make(chan error, 4)
		inj := nodes[0].ep.Caps().InjectSize
		for _, from := range []int{1, 2} {
			x := nodes[from]
			var turn sync.Mutex
			seq := 0
			for range 2 {
				senders.Go(func() {
					for range count / 2 {
						turn.Lock()
						b := message(from, seq, 8+(seq*37)%(inj-7))
						for {
							err := x.ep.Inject(0, b[:8], b[8:])
							if err == rdma.ErrAgain {
								continue
							}
							if err != nil {
								errs <- err
								turn.Unlock()
								return
							}
							break
						}
						seq++
						turn.Unlock()
					}
				})
			}
		}
		senders.Wait()
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			n := len(nodes[0].recvs)
			mu.Unlock()
			if n == 2*count || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		close(stop)
		pollers.Wait()
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
		next := map[int]int{}
		for _, r := range nodes[0].recvs {
			from, seq := int(binary.LittleEndian.Uint32(r.data)), int(binary.LittleEndian.Uint32(r.data[4:]))
			if seq != next[from] || string(r.data) != string(message(from, seq, len(r.data))) {
				t.Fatalf("from node %d: message %d (%d bytes) where %d was due", from, seq, len(r.data), next[from])
			}
			next[from]++
		}
		if len(nodes[0].recvs) != 2*count {
			t.Fatalf("%d of %d messages arrived", len(nodes[0].recvs), 2*count)
		}
	})
}

// TestShmTakesMsg: without an API asked for, shm gets FI_MSG and tcp;ofi_rxm FI_TAGGED.
func TestShmTakesMsg(t *testing.T) {
	for prov, tagged := range map[string]bool{"shm": false, "tcp;ofi_rxm": true} {
		ch, err := New(Options{Provider: prov}).choose()
		if err != nil {
			t.Logf("%s: %v", prov, err)
			continue
		}
		if ch.tagged != tagged {
			t.Errorf("%s: tagged %v", prov, ch.tagged)
		}
		freeChoice(ch)
	}
}

// TestConcurrentReads: reads of many sizes in flight at once, issued from several goroutines while another
// polls, each landing exactly its bytes.
func TestConcurrentReads(t *testing.T) {
	eachFabric(t, func(t *testing.T, fc fabricCase) {
		skipShmTagged(t, fc)
		nodes := openJob(t, fc, 2, Options{})
		a, b := nodes[0], nodes[1]
		if !a.ep.Caps().RMA {
			t.Skip("no FI_RMA")
		}
		const size = 4 << 20
		src := make([]byte, size)
		for i := range src {
			src[i] = byte(i*7 + i>>11)
		}
		smr, err := b.ep.Register(src, rdma.AccessRemoteRead|rdma.AccessLocal)
		if err != nil {
			t.Fatal(err)
		}
		const readers, each = 4, 40
		type read struct {
			dst []byte
			off int
		}
		var mu sync.Mutex
		pending := map[uint64]read{}
		done := 0
		stop := make(chan struct{})
		var pollers sync.WaitGroup
		for _, x := range nodes {
			pollers.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					mu.Lock()
					for _, c := range x.poll() {
						r, ok := pending[c.Ctx]
						if c.Op != rdma.OpRead || c.Err != nil || !ok {
							t.Errorf("node %d: %+v", x.id, c)
							continue
						}
						if string(r.dst) != string(src[r.off:r.off+len(r.dst)]) {
							t.Errorf("read %d of %d bytes at %d brought other bytes", c.Ctx, len(r.dst), r.off)
						}
						delete(pending, c.Ctx)
						done++
					}
					mu.Unlock()
				}
			})
		}
		var wg sync.WaitGroup
		for g := range readers {
			wg.Go(func() {
				for k := range each {
					n := 1 + (g*each+k)*7919%(1<<20)
					off := (g*each + k) * 104729 % (size - n)
					dst := make([]byte, n)
					ctx := uint64(g*each + k)
					mu.Lock()
					pending[ctx] = read{dst, off}
					mu.Unlock()
					for {
						err := a.ep.Read(1, dst, nil, smr.Addr(unsafeAt(src, off)), smr.Key(), ctx)
						if err == rdma.ErrAgain {
							continue
						}
						if err != nil {
							t.Error(err)
						}
						break
					}
				}
			})
		}
		wg.Wait()
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			d := done
			mu.Unlock()
			if d == readers*each || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		close(stop)
		pollers.Wait()
		if done != readers*each {
			t.Fatalf("%d of %d reads completed", done, readers*each)
		}
	})
}

//go:build linux

package shm

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/device/devicetest"
)

type lostSink struct {
	lost chan error
	node atomic.Int64
}

func (s *lostSink) DeliverEager(in *device.Inbound) { in.Done() }
func (s *lostSink) DeliverRTS(*device.Header)       {}
func (s *lostSink) PeerLost(node int, err error) {
	s.node.Store(int64(node))
	s.lost <- err
}

// TestCorruptEntryLosesPeer: garbage in a peer's ring (a sequence number no correct producer writes) makes the
// receiving device report that peer lost, naming it, instead of reading anything out of bounds.
func TestCorruptEntryLosesPeer(t *testing.T) {
	devs, eps := devicePair(t, Options{})
	sinks := [2]*lostSink{{lost: make(chan error, 1)}, {lost: make(chan error, 1)}}
	devicetest.Connect(t, []device.Transport{devs[0], devs[1]}, []device.Sink{sinks[0], sinks[1]}, 10*time.Second)
	// A message goes through; then node 0 "writes" garbage where its next entry would be.
	if err := devs[0].SendEager(&device.Header{Kind: device.KindEager, Type: 1, Source: 0, Dest: 1}, []byte("ok"), nil); err != nil {
		t.Fatal(err)
	}
	in := eps[1].ready[0].Load().in
	for in.ready() || atomicHead(in) == 0 {
		devs[1].Poll()
	}
	next := ringHdr + (atomicHead(in)%in.cells)*cellSize
	atomic.StoreUint64(u64(in.mem, next), 12345) // not head+1
	select {
	case err := <-sinks[1].lost:
		if sinks[1].node.Load() != 0 || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "node 0") {
			t.Fatalf("PeerLost(%d, %v), want node 0 and ErrCorrupt", sinks[1].node.Load(), err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a corrupt entry went unnoticed")
	}
}

func atomicHead(c *consumer) uint64 { return atomic.LoadUint64(u64(c.mem, 0)) }

package ranks

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gompj/gompj/device"
	"github.com/gompj/gompj/queues"
)

// driveDevice is a device whose transfers move only when a rank drives it (device.Poller): a cleared rendezvous
// is completed by the next Poll, as over a device whose progress loop stands down while a rank drives it.
type driveDevice struct {
	ackDevice
	mu      sync.Mutex
	cleared []func()
	polls   atomic.Int32
}

func (d *driveDevice) ClearToSend(h *device.Header, dst []byte, done device.Completer) error {
	d.mu.Lock()
	d.cleared = append(d.cleared, func() {
		for i := range dst {
			dst[i] = byte(i)
		}
		done.Complete(nil)
	})
	d.mu.Unlock()
	return nil
}

func (d *driveDevice) Enter()     {}
func (d *driveDevice) Leave(bool) {}
func (d *driveDevice) Poll() bool {
	d.polls.Add(1)
	d.mu.Lock()
	todo := d.cleared
	d.cleared = nil
	d.mu.Unlock()
	for _, f := range todo {
		f()
	}
	return len(todo) > 0
}

// TestUnexpectedRendezvousDrives: a receive that matches a rendezvous from another node already waiting in the
// unexpected queue (its RTS came before the receive was posted) drives the device while it waits, as a receive
// posted before its RTS does: its transfer moves only as someone polls the device. (Its wait used the local
// policy, and a progress loop that stood down for the rank took up to 10 ms to move it.)
func TestUnexpectedRendezvousDrives(t *testing.T) {
	dev := &driveDevice{}
	w, err := NewWorld(Options{Size: 4, Lo: 0, Hi: 2, EagerLimit: 64 << 10, Policy: queues.DefaultPolicy(1),
		Device: dev, NodeOf: func(r int) int { return r / 2 }})
	if err != nil {
		t.Fatal(err)
	}
	const n = 32 << 10 // int32s
	rts := remoteEager(7, n)
	rts.Kind = device.KindRTS
	w.DeliverRTS(rts) // no receive yet: the RTS waits in the unexpected queue
	buf := make([]int32, n)
	got := make(chan error, 1)
	go func() {
		_, err := w.Comm(0).Recv(buf, 2, 7)
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the receive never completed: its wait did not drive the device (%d polls)", dev.polls.Load())
	}
	if b := sliceMem(TypeInt32, buf).Bytes(); b[1] != 1 || b[len(b)-1] != byte(len(b)-1) {
		t.Fatal("payload not in the buffer")
	}
}

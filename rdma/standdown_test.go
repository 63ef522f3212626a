package rdma

import (
	"testing"

	"github.com/gompj/gompj/device"
)

// TestStandDownFor: a progress goroutine that stood down looks again soon while sends are under way or held back
// (a rank that stops waiting without parking leaves them to it), and seldom otherwise (each look takes a core from
// a spinning rank).
func TestStandDownFor(t *testing.T) {
	d := &Device{}
	if got := d.standDownFor(); got != device.StandDownIdle {
		t.Errorf("nothing under way: looks again after %v, want %v", got, device.StandDownIdle)
	}
	d.pending.Store(1) // a peer's backlog of sends the provider refused for now
	if got := d.standDownFor(); got != device.StandDownCheck {
		t.Errorf("sends held back: looks again after %v, want %v", got, device.StandDownCheck)
	}
	d.pending.Store(0)
	d.inflight.Add(2) // rendezvous sends under way
	if got := d.standDownFor(); got != device.StandDownCheck {
		t.Errorf("rendezvous under way: looks again after %v, want %v", got, device.StandDownCheck)
	}
}

//go:build linux && !race

package shm

import (
	"runtime"
	"testing"

	"github.com/gompj/gompj/device"
)

// Not under the race detector: there sync.Pool drops a share of what it is given back, by design.

// TestBacklogCopiesPooled: a window of eager messages that outruns the ring waits in the sender's backlog as
// copies, which come from a pool: 64 messages of 32 KiB through a 256 KiB ring, round after round, allocate far
// less than their bytes (only the backlog's small entries remain).
func TestBacklogCopiesPooled(t *testing.T) {
	devs, _ := devicePair(t, Options{})
	sinks := connectPing(t, devs, 0)
	const window, size = 64, 32 << 10
	payload := make([]byte, size)
	h := &device.Header{Kind: device.KindEager, Type: 1, Source: 0, Dest: 1}
	devs[0].Enter()
	defer devs[0].Leave(true)
	devs[1].Enter()
	defer devs[1].Leave(true)
	round := func() {
		n := sinks[1].got.Load()
		for range window {
			for devs[0].EagerLimit(1) < size { // credit comes back in a message node 0 must poll
				devs[0].Poll()
				devs[1].Poll()
			}
			if err := devs[0].SendEager(h, payload, nil); err != nil {
				t.Fatal(err)
			}
		}
		for sinks[1].got.Load() < n+window {
			devs[0].Poll() // flushes the backlog as the ring frees
			devs[1].Poll()
		}
	}
	for range 5 {
		round()
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const rounds = 10
	for range rounds {
		round()
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / rounds; per > window*size/8 {
		t.Fatalf("%d bytes allocated per window of %d messages of %d bytes: the backlog's copies are not pooled", per, window, size)
	}
}

//go:build linux

package shm

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestWakeRingsOnce: of the producers that find the sleeping flag up, only the first rings the doorbell (a system
// call); it lowers the flag, and the others see it down.
func TestWakeRingsOnce(t *testing.T) {
	ctl := make([]byte, pageSize)
	wake(ctl)
	if d := atomic.LoadUint32(u32(ctl, ctlDoorbell)); d != 0 {
		t.Fatalf("doorbell %d after a wake with nobody asleep", d)
	}
	atomic.StoreUint32(u32(ctl, ctlSleeping), 1)
	for range 5 {
		wake(ctl)
	}
	if d, s := atomic.LoadUint32(u32(ctl, ctlDoorbell)), atomic.LoadUint32(u32(ctl, ctlSleeping)); d != 1 || s != 0 {
		t.Fatalf("after 5 wakes of a sleeper: doorbell %d (want 1), sleeping %d (want 0)", d, s)
	}
}

// TestWakeNeverLost runs the sleeper's protocol (Wait: raise the flag, read the doorbell, look for work, sleep)
// against producers that publish and wake, many times. A lost wake-up leaves the sleeper asleep with work
// published: it would sleep out its whole (long) timeout, which the test reports.
func TestWakeNeverLost(t *testing.T) {
	ctl := make([]byte, pageSize)
	const producers, each = 4, 20000
	var published atomic.Int64
	var wg sync.WaitGroup
	for range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				published.Add(1)
				wake(ctl)
			}
		}()
	}
	var taken int64
	for taken < producers*each {
		atomic.StoreUint32(u32(ctl, ctlSleeping), 1)
		seen := atomic.LoadUint32(u32(ctl, ctlDoorbell))
		if published.Load() == taken {
			start := time.Now()
			sleep(ctl, seen, time.Minute)
			if d := time.Since(start); d >= time.Minute {
				t.Fatalf("slept out the timeout with %d of %d taken: a lost wake-up", taken, producers*each)
			}
		}
		atomic.StoreUint32(u32(ctl, ctlSleeping), 0)
		taken = published.Load()
	}
	wg.Wait()
}

package ranks

import (
	"runtime"
	"sync/atomic"
)

// spinLock guards a rank's queues. Their critical sections last tens of nanoseconds, while a contended sync.Mutex
// spins in bursts of 30 PAUSE instructions (a microsecond or more on current x86) before it looks again: when a
// sender and its receiver stream small messages, both take the receiver's lock for every message, and
// sync.Mutex's backoff, not the work, set the message rate. spinLock re-reads the lock word until it is free
// (test-and-test-and-set) and yields the processor now and then, so a holder that was descheduled (more ranks than
// cores) gets to run.
type spinLock struct {
	v atomic.Uint32
}

func (l *spinLock) Lock() {
	if !l.v.CompareAndSwap(0, 1) {
		l.lockSlow()
	}
}

func (l *spinLock) lockSlow() {
	for i := 1; ; i++ {
		if l.v.Load() == 0 && l.v.CompareAndSwap(0, 1) {
			return
		}
		if i%128 == 0 {
			runtime.Gosched()
		}
	}
}

func (l *spinLock) Unlock() { l.v.Store(0) }

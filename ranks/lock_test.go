package ranks

import (
	"sync"
	"testing"
)

// spinLock excludes: a plain counter incremented under it by more goroutines than cores ends exact, and the race
// detector (CI runs this package under it) sees every increment ordered by the lock.
func TestSpinLockExcludes(t *testing.T) {
	const goroutines, each = 8, 20000
	var l spinLock
	var wg sync.WaitGroup
	count := 0
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				l.Lock()
				count++
				l.Unlock()
			}
		}()
	}
	wg.Wait()
	if count != goroutines*each {
		t.Fatalf("count %d, want %d", count, goroutines*each)
	}
}

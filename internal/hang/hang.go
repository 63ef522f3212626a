package hang

import (
	"testing"
	"time"
)

// Within runs job on a goroutine of its own and returns what it returned, failing t (name says which case) if it
// has not returned after limit.
func Within(t testing.TB, name string, limit time.Duration, job func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- job() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("%s: the job hangs (%v)", name, limit)
		return nil
	}
}

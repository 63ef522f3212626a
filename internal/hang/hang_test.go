package hang

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestWithinReturns: a job that returns in time gives back its error, and the test goes on.
func TestWithinReturns(t *testing.T) {
	boom := errors.New("boom")
	if err := Within(t, "quick", time.Minute, func() error { return boom }); err != boom {
		t.Fatalf("Within returned %v, want the job's error", err)
	}
}

// failed is what recorder's Fatalf panics with: testing's ends the test's goroutine, this one unwinds to the test.
type failed struct{ msg string }

// recorder is a testing.TB whose Fatalf stops its caller, as the real one does, without failing the real test.
type recorder struct{ testing.TB }

func (recorder) Helper() {}
func (recorder) Fatalf(format string, args ...any) {
	panic(failed{fmt.Sprintf(format, args...)})
}

// TestWithinFailsAHang: a job that never returns fails the test, naming the case, once the limit has passed.
func TestWithinFailsAHang(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	defer func() {
		f, ok := recover().(failed)
		if !ok || !strings.Contains(f.msg, "stuck: the job hangs") {
			t.Fatalf("Within's failure: %+v", f)
		}
	}()
	// The job ends after 10 s all the same, so that a Within that waited for it fails the test rather than hangs.
	Within(recorder{t}, "stuck", time.Millisecond, func() error {
		select {
		case <-block:
		case <-time.After(10 * time.Second):
		}
		return nil
	})
	t.Fatal("Within returned for a job that had not")
}

package nbc

import "testing"

// TestScratch: buffers under 32 KiB are made; larger ones come from the class that holds them, are sized as asked,
// and go back to it when the schedule gives them back.
func TestScratch(t *testing.T) {
	for _, c := range []struct{ n, class int }{{0, -1}, {1, -1}, {32<<10 - 1, -1}, {32 << 10, 0}, {32<<10 + 1, 1},
		{64 << 10, 1}, {1 << 20, 5}, {1<<20 + 1, 6}} {
		if got := scratchClass(c.n); got != c.class {
			t.Errorf("scratchClass(%d) = %d, want %d", c.n, got, c.class)
		}
	}
	var s Schedule
	small := s.scratch(100)
	if len(small) != 100 || len(s.held) != 0 {
		t.Fatalf("a small buffer: len %d, held %d", len(small), len(s.held))
	}
	b := s.scratch(40 << 10)
	if len(b) != 40<<10 || cap(b) != 64<<10 || len(s.held) != 1 {
		t.Fatalf("a pooled buffer: len %d cap %d held %d", len(b), cap(b), len(s.held))
	}
	b[0] = 7
	s.giveBack()
	if len(s.held) != 0 {
		t.Fatalf("%d buffers held after giveBack", len(s.held))
	}
	// The pool may drop what it was given (the collector empties pools), so a buffer of the class is all that is
	// asked of the next take.
	if c := s.scratch(50 << 10); cap(c) != 64<<10 || len(c) != 50<<10 {
		t.Fatalf("the next take: len %d cap %d", len(c), cap(c))
	}
}

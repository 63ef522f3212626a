package nbc

import "testing"

// TestScratch: a schedule records the pooled buffers it takes, sized as asked, and holds none after giveBack; a
// buffer too large for the pools is made and not recorded.
func TestScratch(t *testing.T) {
	var s Schedule
	a, b := s.scratch(100), s.scratch(40<<10)
	if len(a) != 100 || len(b) != 40<<10 || len(s.held) != 2 {
		t.Fatalf("two pooled buffers: len %d and %d, held %d", len(a), len(b), len(s.held))
	}
	if &(*s.held[1])[0] != &b[0] {
		t.Fatal("the holder recorded is not the buffer's")
	}
	s.giveBack()
	if len(s.held) != 0 {
		t.Fatalf("%d buffers held after giveBack", len(s.held))
	}
	if big := s.scratch(64 << 20); len(big) != 64<<20 || len(s.held) != 0 {
		t.Fatalf("a buffer beyond the pools: len %d, held %d", len(big), len(s.held))
	}
}

package node

import "testing"

// TestHostRanks: the spin decision counts every rank on this host, across the node processes that share it.
func TestHostRanks(t *testing.T) {
	l, err := NewLayout(10, 4, 0) // blocks of 3, 3, 2, 2
	if err != nil {
		t.Fatal(err)
	}
	table := []string{"10.0.0.1:4000", "10.0.0.1:4001", "10.0.0.2:4000", "[fd00::1]:4000"}
	for _, c := range []struct{ self, want int }{{0, 6}, {1, 6}, {2, 2}, {3, 2}} {
		if got := hostRanks(table, c.self, l); got != c.want {
			t.Errorf("node %d: %d ranks on its host, want %d", c.self, got, c.want)
		}
	}
}

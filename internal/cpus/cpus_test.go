package cpus

import "testing"

func TestCount(t *testing.T) {
	for s, want := range map[string]int{"0": 1, "0-1": 2, "0-1\n": 2, "0-3,8-11": 8, "0,2,4-5": 4, "": 0, "3-1": 0,
		"a-b": 0, "-1": 0, "0-": 0} {
		if got := Count(s); got != want {
			t.Errorf("Count(%q) = %d, want %d", s, got, want)
		}
	}
}

package mem

import "testing"

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want int
	}{
		{"32768K\n", 32 << 20}, {"2M", 2 << 20}, {"1G", 1 << 30}, {"512", 512}, {"", 0}, {"K", 0}, {"-4K", 0},
		{"12x", 0}, {"9999999999999999999G", 0},
	} {
		if got := parseSize(tc.s); got != tc.want {
			t.Errorf("parseSize(%q) = %d, want %d", tc.s, got, tc.want)
		}
	}
	if n, s := lastLevelCache(); n < 0 || s < 1 {
		t.Errorf("lastLevelCache() = %d, %d", n, s)
	}
}

func TestCountCPUs(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want int
	}{
		{"0-1\n", 2}, {"5", 1}, {"0-3,8-11", 8}, {"0,2,4", 3}, {"", 0}, {"3-1", 0}, {"a-b", 0}, {"-1", 0},
	} {
		if got := countCPUs(tc.s); got != tc.want {
			t.Errorf("countCPUs(%q) = %d, want %d", tc.s, got, tc.want)
		}
	}
}

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

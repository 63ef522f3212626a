package harness

import (
	"slices"
	"testing"
)

// Under the race detector, node processes get the detector's exit sleep cut, keeping whatever else GORACE says and
// leaving alone a sleep it sets; without the detector, nothing is added.
func TestRaceEnv(t *testing.T) {
	cases := []struct {
		gorace string
		want   []string
	}{
		{"", []string{"GORACE=atexit_sleep_ms=20"}},
		{"halt_on_error=1", []string{"GORACE=halt_on_error=1 atexit_sleep_ms=20"}},
		{"atexit_sleep_ms=500 halt_on_error=1", nil},
	}
	for _, c := range cases {
		want := c.want
		if !raceEnabled {
			want = nil
		}
		if got := raceEnv(c.gorace); !slices.Equal(got, want) {
			t.Errorf("raceEnv(%q) = %q, want %q (race detector on: %v)", c.gorace, got, want, raceEnabled)
		}
	}
}

package main

import (
	"strings"
	"testing"
)

// The halo example (persistent requests) runs across node processes and matches its serial computation.
func TestRunHaloExample(t *testing.T) {
	r := runGompj(t, nil, "run", "-np", "3", "-nodes", "2", "./examples/halo", "500", "20")
	if r.code != 0 || !strings.Contains(r.stdout, "halo: 3 ranks x 500 points, 20 steps with persistent requests: ok") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

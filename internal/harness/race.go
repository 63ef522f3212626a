//go:build race

package harness

// raceEnabled: this binary, and so every node process it starts, runs under the race detector.
const raceEnabled = true

//go:build race

package ranks

const raceEnabled = true

//go:build race

package nbc

const raceEnabled = true

//go:build !race

package nbc

const raceEnabled = false

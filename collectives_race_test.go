//go:build race

package gompj

const raceEnabled = true

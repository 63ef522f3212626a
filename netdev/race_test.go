//go:build linux && race

package netdev

const raceEnabled = true

//go:build race

package gompj_test

const raceEnabled = true

// Package proc is what every starter of node processes on this box needs from the operating system: a child that
// leads its own process group, signals to that group, and the exit status a shell would report for it. The
// launcher (cmd/gompj) and the test harness both start node processes through it.
//
// Imports: the standard library only.
package proc

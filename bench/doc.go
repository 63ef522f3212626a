// Package bench holds gompj's OSU-style microbenchmarks and the driver that runs them on every rank and prints
// OSU's format (`# Size  Latency (us)` and so on, one size per line, plain numbers), so that figures can be set
// beside osu_latency, osu_bw and the OSU collective benchmarks.
//
// Benchmarks register themselves (Register); cmd/gompj's `bench` subcommand looks them up by name.
//
// Imports: the root package gompj and the standard library.
package bench

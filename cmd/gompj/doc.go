// Command gompj is gompj's command line: it launches jobs on this box, on several node processes, over ssh or
// under Slurm (run), runs the OSU-style benchmarks (bench) and the NAS kernels (npb), and prints the module version
// from the build information (version), the effective configuration (info) and the documentation of every flag and
// environment variable (help).
//
// Subcommands live in the commands map; another file adds one with an init function calling register (npb does).
//
// Imports: gompj, gompj/bench, gompj/collectives, gompj/npb, gompj/npb/sweep, gompj/node, gompj/node/bootstrap,
// internal/env (variables, the job contract), internal/proc (node processes) and the standard library.
package main

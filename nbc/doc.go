// Package nbc implements gompj's nonblocking (MPI-3) and persistent (MPI-4) collectives.
//
// Each call builds a schedule (engine.go): rounds of sends, receives, local copies and reductions, waits on
// shared-memory conditions and sub-operations, made from the same algorithms as the blocking collectives of
// package collectives (the blocking algorithms cut at their waits) and chosen from the same selection table. The
// schedule is a state machine that does no I/O itself: a transport posts its communication steps and reports their
// completions, so unit tests drive it with a fake network that completes steps in any order.
//
// Imports: collectives, ranks, queues, the standard library.
package nbc

// Package hang guards tests against a job that never returns: Within runs the job and fails the test, naming the
// case, once a time limit has passed, so that a hang shows as that case's failure rather than as the whole test
// binary's timeout, minutes later and with every goroutine's stack. It is for the packages' own tests, below the
// root package too (nbc's), which internal/harness cannot serve: harness imports gompj.
//
// Imports: the standard library only.
package hang

//go:build !linux

package node

// canPin says whether pin binds ranks to cores here: thread affinity is sched_setaffinity, Linux's (runRanks says
// once that GOMPJ_PIN has no effect).
const canPin = false

// pin does nothing: see canPin.
func pin(id int) {}

package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestKillLauncherEndsJob: a launcher killed outright (SIGKILL: it can do nothing) takes its job with it. Node
// processes of a larger job lose their coordinator and abort; a one-node job has none, and its process went on
// running; Linux now kills it with its starter (and only Linux can, hence this file).
func TestKillLauncherEndsJob(t *testing.T) {
	for _, args := range [][]string{{"-np", "2"}, {"-np", "4", "-nodes", "2"}} {
		cmd, pids, _, _, done := startReady(t, args...)
		cmd.Process.Kill()
		waitExit(t, cmd, done)
		deadline := time.Now().Add(hangBound)
		for r, pid := range pids {
			for alive(pid) {
				if time.Now().After(deadline) {
					t.Fatalf("%v: rank %d's process %d outlived its launcher by %v", args, r, pid, hangBound)
				}
				time.Sleep(10 * time.Millisecond) // polling the process table: the kernel's kill is asynchronous
			}
		}
	}
}

// alive reports whether process pid exists and is not a zombie (dead, waiting for a parent that is gone to reap it).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

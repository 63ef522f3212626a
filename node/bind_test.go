package node

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/gompj/gompj/internal/cpus"
)

func TestBindPart(t *testing.T) {
	cpus := []int{0, 1, 2, 3, 4, 5, 8, 9}
	for _, tc := range []struct {
		cpus    []int
		i, m    int
		want    []int
		wantStr string
	}{
		{cpus, 0, 2, []int{0, 1, 2, 3}, "0-3"},
		{cpus, 1, 2, []int{4, 5, 8, 9}, "4-5,8-9"},
		{cpus, 0, 3, []int{0, 1}, "0-1"}, // 8 over 3: 2, 3, 3
		{cpus, 1, 3, []int{2, 3, 4}, "2-4"},
		{cpus, 2, 3, []int{5, 8, 9}, "5,8-9"},
		{[]int{0, 1}, 2, 3, []int{0}, "0"}, // more processes than CPUs: one each, in turn
		{[]int{0, 1}, 1, 3, []int{1}, "1"},
		{[]int{7}, 0, 1, []int{7}, "7"},
		{nil, 0, 2, nil, ""},
		{cpus, 2, 2, nil, ""}, // not among the m
	} {
		got := bindPart(tc.cpus, tc.i, tc.m)
		if !slices.Equal(got, tc.want) || spans(got) != tc.wantStr {
			t.Errorf("bindPart(%v, %d, %d) = %v (%q), want %v (%q)", tc.cpus, tc.i, tc.m, got, spans(got), tc.want,
				tc.wantStr)
		}
	}
	// The parts of m processes cover the CPUs once.
	for m := 1; m <= 9; m++ {
		var all []int
		for i := range m {
			all = append(all, bindPart(cpus, i, m)...)
		}
		if m <= len(cpus) && !slices.Equal(all, cpus) {
			t.Errorf("m=%d: the parts make %v, want %v", m, all, cpus)
		}
	}
}

// TestBindThreads: bindShare binds every thread of the process, and threads started afterwards, to the process's
// part. It runs in a child process (the test binary again), whose binding the other tests must not inherit.
func TestBindThreads(t *testing.T) {
	if os.Getenv("BIND_TEST_CHILD") == "1" {
		bindChild()
		return
	}
	if runtime.GOOS != "linux" {
		t.Skip("binding is Linux's")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestBindThreads$")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOMAXPROCS=") { // the child's GOMAXPROCS follows its binding
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "BIND_TEST_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "bound:") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(string(out)))
}

// bindChild binds the process as the second of two node processes of its host and checks every thread, before and
// after starting new ones; it prints "bound: ..." or exits non-zero.
func bindChild() {
	fail := func(f string, a ...any) { fmt.Printf(f+"\n", a...); os.Exit(1) }
	hold, started := make(chan struct{}), make(chan struct{})
	for range 3 { // goroutines on threads of their own, running before the binding
		go func() { runtime.LockOSThread(); started <- struct{}{}; <-hold }()
		<-started
	}
	line := bindShare(BindCores, 1, 2)
	if line == "" {
		fail("bindShare bound nothing")
	}
	want := strings.TrimSuffix(strings.Fields(line)[2], ",") // "cores CPUs <list>, GOMAXPROCS n: ..."
	if n := cpus.Count(want); n == 0 || runtime.GOMAXPROCS(0) != min(n, runtime.NumCPU()) {
		fail("bound to CPUs %s, GOMAXPROCS %d: want as many as the CPUs", want, runtime.GOMAXPROCS(0))
	}
	for range 3 { // and after
		go func() { runtime.LockOSThread(); started <- struct{}{}; <-hold }()
		<-started
	}
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		fail("%v", err)
	}
	for _, e := range ents {
		b, err := os.ReadFile("/proc/self/task/" + e.Name() + "/status")
		if err != nil {
			continue // ended meanwhile
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok && strings.TrimSpace(v) != want {
				fail("thread %s runs on CPUs %s, want %s", e.Name(), strings.TrimSpace(v), want)
			}
		}
	}
	close(hold)
	fmt.Printf("bound: %d threads on CPUs %s\n", len(ents), want)
}

package node

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

func TestProcShare(t *testing.T) {
	cases := []struct {
		name                    string
		cpus, online, mine, all int
		userSet                 bool
		want                    int
	}{
		{"alone on its host", 8, 8, 8, 8, false, 0},
		{"two halves of 2 cores", 2, 2, 2, 4, false, 1},
		{"cores suffice", 8, 8, 4, 8, false, 0},
		{"one rank per node, cores suffice", 2, 2, 1, 2, false, 0},
		{"two halves of 8 cores, 16 ranks", 8, 8, 8, 16, false, 4},
		{"uneven split rounds", 8, 8, 3, 12, false, 2},
		{"many small nodes keep a core", 2, 2, 1, 8, false, 1},
		{"GOMAXPROCS set by the user", 8, 8, 8, 16, true, 0},
		{"a cpuset already divided the host", 4, 8, 8, 16, false, 0},
		{"online unknown", 8, 0, 8, 16, false, 4},
		{"no local ranks", 8, 8, 0, 8, false, 0},
	}
	for _, c := range cases {
		if got := procShare(c.cpus, c.online, c.mine, c.all, c.userSet); got != c.want {
			t.Errorf("%s: procShare(%d, %d, %d, %d, %v) = %d, want %d", c.name, c.cpus, c.online, c.mine, c.all,
				c.userSet, got, c.want)
		}
	}
}

// Overlap mode takes one more P for the job's progress, and gives it back when the last job that holds it ends;
// off, or with GOMAXPROCS set by the user, it changes nothing.
func TestProgressCore(t *testing.T) {
	if v, set := os.LookupEnv("GOMAXPROCS"); set {
		t.Setenv("GOMAXPROCS", v) // restored when the test ends
		os.Unsetenv("GOMAXPROCS")
	}
	base := runtime.GOMAXPROCS(0)
	if line, restore := progressCore(false); line != "" || runtime.GOMAXPROCS(0) != base {
		t.Fatalf("off: line %q, GOMAXPROCS %d, want \"\" and %d", line, runtime.GOMAXPROCS(0), base)
	} else {
		restore()
	}
	line, restore1 := progressCore(true)
	if !strings.Contains(line, "GOMPJ_OVERLAP") || runtime.GOMAXPROCS(0) != base+1 {
		t.Fatalf("on: line %q, GOMAXPROCS %d, want a route line and %d", line, runtime.GOMAXPROCS(0), base+1)
	}
	_, restore2 := progressCore(true) // a second node runtime of the same process
	if runtime.GOMAXPROCS(0) != base+1 {
		t.Fatalf("two jobs: GOMAXPROCS %d, want %d", runtime.GOMAXPROCS(0), base+1)
	}
	restore1()
	restore1() // twice: once counts
	if runtime.GOMAXPROCS(0) != base+1 {
		t.Fatalf("one job left: GOMAXPROCS %d, want %d", runtime.GOMAXPROCS(0), base+1)
	}
	restore2()
	if runtime.GOMAXPROCS(0) != base {
		t.Fatalf("after both: GOMAXPROCS %d, want %d", runtime.GOMAXPROCS(0), base)
	}
	t.Setenv("GOMAXPROCS", strconv.Itoa(base))
	if line, restore := progressCore(true); line != "" || runtime.GOMAXPROCS(0) != base {
		t.Fatalf("GOMAXPROCS set: line %q, GOMAXPROCS %d, want \"\" and %d", line, runtime.GOMAXPROCS(0), base)
	} else {
		restore()
	}
}

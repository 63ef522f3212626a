package node

import "testing"

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

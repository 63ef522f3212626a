package cpus

import (
	"strconv"
	"strings"
)

// Count counts the CPUs of a Linux CPU list ("0-3,8,10-11", surrounding space ignored); 0 when it is malformed.
func Count(list string) int {
	n := 0
	for _, part := range strings.Split(strings.TrimSpace(list), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return 0
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0
			}
		}
		n += b - a + 1
	}
	return n
}

package node

import (
	"fmt"
	"strconv"
	"strings"
)

// bindPart is the i-th of m node processes' part of cpus (the CPUs the process may run on, ascending): m equal,
// contiguous parts, the first ones a CPU smaller when they do not divide evenly; with more processes than CPUs,
// one CPU each, in turn.
func bindPart(cpus []int, i, m int) []int {
	n := len(cpus)
	if n == 0 || m <= 0 || i < 0 || i >= m {
		return nil
	}
	if n < m {
		return cpus[i%n : i%n+1]
	}
	return cpus[i*n/m : (i+1)*n/m]
}

// cpuList writes CPUs as Linux does ("0-3,8").
func cpuList(cpus []int) string {
	var b strings.Builder
	for k := 0; k < len(cpus); {
		j := k
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[k]))
		if j > k {
			fmt.Fprintf(&b, "-%d", cpus[j])
		}
		k = j + 1
	}
	return b.String()
}

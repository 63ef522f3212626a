package node

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

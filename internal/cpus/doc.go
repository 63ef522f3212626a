// Package cpus reads the CPU lists Linux writes in sysfs ("0-3,8-11"): node counts the host's online CPUs with it,
// and internal/mem the CPUs that share a cache.
//
// Imports: the standard library only.
package cpus

//go:build !linux

package mem

// lastLevelCache: unknown outside Linux (Copy then cuts up to defaultCut).
func lastLevelCache() (size, sharers int) { return 0, 1 }

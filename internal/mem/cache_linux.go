package mem

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gompj/gompj/internal/cpus"
)

// lastLevelCache returns the size in bytes of the largest data or unified cache of CPU 0 that sysfs lists, and how
// many CPUs share it (at least 1); 0 and 1 when sysfs says nothing.
func lastLevelCache() (size, sharers int) {
	dirs, _ := filepath.Glob("/sys/devices/system/cpu/cpu0/cache/index*")
	sharers = 1
	for _, d := range dirs {
		typ, err := os.ReadFile(filepath.Join(d, "type"))
		if err != nil || strings.TrimSpace(string(typ)) == "Instruction" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "size"))
		if err != nil {
			continue
		}
		if n := parseSize(string(b)); n > size {
			size, sharers = n, 1
			if list, err := os.ReadFile(filepath.Join(d, "shared_cpu_list")); err == nil {
				sharers = max(cpus.Count(string(list)), 1)
			}
		}
	}
	return size, sharers
}

// parseSize reads a sysfs cache size ("32768K", "2M", "512"), or returns 0.
func parseSize(s string) int {
	s = strings.TrimSpace(s)
	mult := 1
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, strings.TrimSuffix(s, "G")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > math.MaxInt/mult {
		return 0
	}
	return n * mult
}

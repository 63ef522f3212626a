package node

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Config configures a job. Zero fields take their defaults; FromEnv fills them from GOMPJ_* variables.
type Config struct {
	// Ranks is the number of ranks in the job (GOMPJ_NP; default runtime.NumCPU()).
	Ranks int
	// EagerLimit is the intra-node protocol switch in bytes: messages up to it are copied eagerly, larger ones go
	// rendezvous (GOMPJ_EAGER_LIMIT; default 64 KiB).
	EagerLimit int
	// Pin locks each rank's goroutine to an OS thread bound to core rank % NumCPU (GOMPJ_PIN=1; default off).
	Pin bool
	// SpinTime is how long a waiting rank spins before it yields and parks (GOMPJ_SPIN, a Go duration such as
	// 20us; default 50us when the node's ranks fit its cores, else no spinning). A negative value means none.
	SpinTime time.Duration
	// Yields is how many times a waiting rank yields the processor after spinning, before it parks
	// (GOMPJ_YIELDS; default 50, or 10 when ranks outnumber cores).
	Yields int
}

// Variables lists the environment variables gompj reads, with their meaning, for `gompj help`.
var Variables = [][2]string{
	{"GOMPJ_NP", "number of ranks in the job (default: the number of CPUs)"},
	{"GOMPJ_EAGER_LIMIT", "intra-node protocol switch in bytes; larger messages go rendezvous (default 65536)"},
	{"GOMPJ_PIN", "1 pins each rank to a core (default 0)"},
	{"GOMPJ_SPIN", "how long a waiting rank spins before yielding, a Go duration (default 50us when ranks <= cores, else 0)"},
	{"GOMPJ_YIELDS", "how often a waiting rank yields before it parks (default 50, or 10 when ranks > cores)"},
}

// DefaultEagerLimit is the default intra-node protocol switch.
const DefaultEagerLimit = 64 << 10

// FromEnv returns c with every zero field filled from the environment, or an error naming a malformed variable.
func FromEnv(c Config) (Config, error) {
	var err error
	envInt := func(name string, dst *int) {
		if v, ok := os.LookupEnv(name); ok && *dst == 0 && err == nil {
			n, e := strconv.Atoi(strings.TrimSpace(v))
			if e != nil || n < 0 {
				err = fmt.Errorf("gompj: %s=%q is not a non-negative integer", name, v)
				return
			}
			*dst = n
		}
	}
	envInt("GOMPJ_NP", &c.Ranks)
	envInt("GOMPJ_EAGER_LIMIT", &c.EagerLimit)
	envInt("GOMPJ_YIELDS", &c.Yields)
	if v, ok := os.LookupEnv("GOMPJ_PIN"); ok && !c.Pin && err == nil {
		b, e := strconv.ParseBool(strings.TrimSpace(v))
		if e != nil {
			err = fmt.Errorf("gompj: GOMPJ_PIN=%q is not a boolean", v)
		}
		c.Pin = b
	}
	if v, ok := os.LookupEnv("GOMPJ_SPIN"); ok && c.SpinTime == 0 && err == nil {
		d, e := time.ParseDuration(strings.TrimSpace(v))
		if e != nil {
			err = fmt.Errorf("gompj: GOMPJ_SPIN=%q is not a duration", v)
		}
		if d == 0 {
			d = -1
		}
		c.SpinTime = d
	}
	return c, err
}

// withDefaults fills the remaining zero fields.
func (c Config) withDefaults() (Config, error) {
	if c.Ranks < 0 || c.EagerLimit < 0 || c.Yields < 0 {
		return c, fmt.Errorf("gompj: negative value in %+v", c)
	}
	if c.Ranks == 0 {
		c.Ranks = runtime.NumCPU()
	}
	if c.EagerLimit == 0 {
		c.EagerLimit = DefaultEagerLimit
	}
	return c, nil
}

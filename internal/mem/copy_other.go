//go:build !amd64

package mem

import "math"

// nonTemporalMin: the runtime's memmove uses no non-temporal stores here, so Copy cuts nothing.
const nonTemporalMin = math.MaxInt

package npb

import (
	"errors"
	"fmt"

	"github.com/gompj/gompj"
)

// IS: rank 2^n integer keys with a bucket sort. Each rank generates its share
// of the key sequence, counts its keys per bucket, the bucket totals are
// summed with Allreduce, buckets are assigned to ranks so that each gets about
// the same number of keys, Alltoall exchanges the per-rank key counts and
// Alltoallv moves the keys; then each rank ranks the key range it owns.

const (
	isIterations = 10
	isTestSize   = 5
	isSeed       = 314159265
	isMaxBuckets = 1 << 10 // the most buckets of any class
)

type isClass struct {
	totalKeysLog2, maxKeyLog2, bucketsLog2 int
	testIndex, testRank                    [isTestSize]int
}

func isParams(class byte) (isClass, bool) {
	switch class {
	case 'S':
		return isClass{16, 11, 9,
			[5]int{48427, 17148, 23627, 62548, 4431},
			[5]int{0, 18, 346, 64917, 65463}}, true
	case 'W':
		return isClass{20, 16, 10,
			[5]int{357773, 934767, 875723, 898999, 404505},
			[5]int{1249, 11698, 1039987, 1043896, 1048018}}, true
	case 'A':
		return isClass{23, 19, 10,
			[5]int{2112377, 662041, 5336171, 3642833, 4250760},
			[5]int{104, 17523, 123928, 8288932, 8388264}}, true
	case 'B':
		return isClass{25, 21, 10,
			[5]int{41869, 812306, 5102857, 18232239, 26860214},
			[5]int{33422937, 10244, 59149, 33135281, 99}}, true
	case 'C':
		return isClass{27, 23, 10,
			[5]int{44172927, 72999161, 74326391, 129606274, 21736814},
			[5]int{61147, 882988, 266290, 133997595, 133525895}}, true
	}
	return isClass{}, false
}

// isExpectedRank is the rank the test key i must have at the given
// iteration: NPB shifts the reference ranks differently for each class.
func isExpectedRank(class byte, p *isClass, i, iteration int) int {
	r := p.testRank[i]
	switch class {
	case 'S', 'C':
		if i <= 2 {
			return r + iteration
		}
		return r - iteration
	case 'W':
		if i < 2 {
			return r + iteration - 2
		}
		return r - iteration
	case 'A':
		if i <= 2 {
			return r + iteration - 1
		}
		return r - iteration + 1
	case 'B':
		if i == 1 || i == 2 || i == 4 {
			return r + iteration
		}
		return r - iteration
	}
	return -1
}

// isGenerateKeys fills keys with the rank's part of the key sequence: key i
// is maxKey/4 * (sum of four successive deviates), the sequence starting at
// 4*len(keys)*rank past the seed.
func isGenerateKeys(keys []int32, maxKey int, rank int) {
	const a = uint64(RandA)
	s := skip46(isSeed, a, int64(4*len(keys))*int64(rank))
	k := float64(maxKey / 4)
	for i := range keys {
		x := randlc46(&s, a)
		x += randlc46(&s, a)
		x += randlc46(&s, a)
		x += randlc46(&s, a)
		keys[i] = int32(k * x)
	}
}

// isRank is one rank's state for the IS kernel.
type isRank struct {
	c        *gompj.Comm
	class    byte
	p        isClass
	np, me   int
	numKeys  int // keys generated per rank
	maxKey   int
	nBuckets int
	shift    uint

	keys      []int32 // key_array
	buff1     []int32 // keys sorted into buckets (send buffer), then the key histogram
	buff2     []int32 // keys received after redistribution
	bsize     []int32 // local bucket sizes + hidden test keys
	btotal    []int32 // global bucket sizes + test keys
	bptr      *[isMaxBuckets]uint32
	distLo    []int // first bucket of each rank
	distHi    []int // last bucket of each rank
	sendCount []int
	sendDispl []int
	recvCount []int
	recvDispl []int

	passed int

	// state of the last iteration, for full verification
	lastLocal  int
	lastMinKey int
}

func newISRank(c *gompj.Comm, class byte, p isClass) (*isRank, error) {
	np := c.Size()
	totalKeys := 1 << p.totalKeysLog2
	r := &isRank{
		c: c, class: class, p: p, np: np, me: c.Rank(),
		numKeys:  totalKeys / np,
		maxKey:   1 << p.maxKeyLog2,
		nBuckets: 1 << p.bucketsLog2,
		shift:    uint(p.maxKeyLog2 - p.bucketsLog2),
	}
	r.keys = make([]int32, r.numKeys)
	// buff1 is also the histogram of the rank's key range, which is about
	// maxKey/np long for ranks in the middle of the key distribution and
	// longer at its thin ends; rank grows it when the range does not fit.
	// buff1 and buff2 are what Alltoallv moves: memory from gompj.Alloc (see lend).
	var err error
	if r.buff1, err = gompj.Alloc[int32](c, r.numKeys); err != nil {
		return nil, err
	}
	if r.buff2, err = gompj.Alloc[int32](c, r.numKeys+r.numKeys/2+1); err != nil {
		gompj.Free(c, r.buff1)
		return nil, err
	}
	r.bsize = make([]int32, max(r.nBuckets, isMaxBuckets)+isTestSize)
	r.btotal = make([]int32, r.nBuckets+isTestSize)
	r.bptr = new([isMaxBuckets]uint32)
	r.distLo = make([]int, np)
	r.distHi = make([]int, np)
	r.sendCount = make([]int, np)
	r.sendDispl = make([]int, np)
	r.recvCount = make([]int, np)
	r.recvDispl = make([]int, np)
	return r, nil
}

// free gives back the exchange buffers.
func (r *isRank) free() error {
	return errors.Join(gompj.Free(r.c, r.buff1), gompj.Free(r.c, r.buff2))
}

// rank performs one ranking iteration.
func (r *isRank) rank(iteration int) error {
	nb := r.nBuckets
	if r.me == 0 {
		r.keys[iteration] = int32(iteration)
		r.keys[iteration+isIterations] = int32(r.maxKey - iteration)
	}
	// Count the keys per bucket, then sort them into buckets. The keys are
	// below maxKey by construction, so a bucket index is below nBuckets
	// and the mask, which lets the compiler drop the bounds checks on the
	// count and pointer arrays, changes nothing.
	cnt := (*[isMaxBuckets]int32)(r.bsize[:isMaxBuckets])
	clear(r.bsize)
	shift := r.shift
	isCount(cnt, r.keys, shift)
	bptr := r.bptr
	bptr[0] = 0
	for i := 1; i < nb; i++ {
		bptr[i] = bptr[i-1] + uint32(cnt[i-1])
	}
	isScatter(r.buff1, bptr, r.keys, shift)
	// Hide the test keys owned by this rank above the bucket counts so that
	// the Allreduce below delivers them to everybody.
	bsize := r.bsize[:nb+isTestSize]
	for i := 0; i < isTestSize; i++ {
		t := r.p.testIndex[i]
		if t/r.numKeys == r.me {
			bsize[nb+i] = r.keys[t%r.numKeys]
		}
	}

	if err := r.c.Allreduce(bsize, r.btotal, gompj.Sum); err != nil {
		return err
	}

	// Assign buckets to ranks: accumulate the totals until they pass
	// (j+1)*numKeys; those buckets go to rank j.
	btotal := r.btotal
	for j := range r.distLo {
		r.distLo[j], r.distHi[j], r.sendCount[j], r.sendDispl[j] = 0, 0, 0, 0
	}
	acc, localAcc, j := 0, 0, 0
	for i := 0; i < nb; i++ {
		acc += int(btotal[i])
		localAcc += int(bsize[i])
		if acc >= (j+1)*r.numKeys {
			r.sendCount[j] = localAcc
			if j != 0 {
				r.sendDispl[j] = r.sendDispl[j-1] + r.sendCount[j-1]
				r.distLo[j] = r.distHi[j-1] + 1
			}
			r.distHi[j] = i
			j++
			localAcc = 0
		}
	}
	for ; j < r.np; j++ {
		r.sendCount[j] = 0
		r.distLo[j] = 1
		if j > 0 {
			r.sendDispl[j] = r.sendDispl[j-1] + r.sendCount[j-1]
		}
	}

	if err := r.c.Alltoall(r.sendCount, r.recvCount); err != nil {
		return err
	}
	r.recvDispl[0] = 0
	for i := 1; i < r.np; i++ {
		r.recvDispl[i] = r.recvDispl[i-1] + r.recvCount[i-1]
	}
	total := r.recvDispl[r.np-1] + r.recvCount[r.np-1]
	if total > len(r.buff2) {
		var err error
		if r.buff2, err = regrow(r.c, r.buff2, total+total/4); err != nil {
			return err
		}
	}
	if err := r.c.Alltoallv(r.buff1, r.sendCount, r.sendDispl, r.buff2, r.recvCount, r.recvDispl); err != nil {
		return err
	}

	minKey := r.distLo[r.me] << shift
	maxKey := ((r.distHi[r.me] + 1) << shift) - 1
	// m: number of keys held by lower ranks.
	m := 0
	for k := 0; k < r.me; k++ {
		for i := r.distLo[k]; i <= r.distHi[k]; i++ {
			m += int(btotal[i])
		}
	}
	local := 0
	for i := r.distLo[r.me]; i <= r.distHi[r.me]; i++ {
		local += int(btotal[i])
	}
	// Key population, then cumulative counts, over [minKey, maxKey].
	span := maxKey - minKey + 1
	if span < 0 {
		span = 0
	}
	if span > len(r.buff1) {
		var err error
		if r.buff1, err = regrow(r.c, r.buff1, span+span/4); err != nil {
			return err
		}
	}
	hist := r.buff1[:span]
	for i := range hist {
		hist[i] = 0
	}
	isHistogram(hist, r.buff2[:local], uint32(minKey))
	for i := 1; i < span; i++ {
		hist[i] += hist[i-1]
	}

	// Partial verification.
	for i := 0; i < isTestSize; i++ {
		k := int(btotal[nb+i])
		if minKey <= k && k <= maxKey {
			keyRank := m
			if k-1 >= minKey {
				keyRank += int(hist[k-1-minKey])
			}
			if keyRank == isExpectedRank(r.class, &r.p, i, iteration) {
				r.passed++
			}
		}
	}
	r.lastLocal = local
	r.lastMinKey = minKey
	return nil
}

// isCount adds to cnt the number of keys in each bucket (key >> shift).
// Unrolled by eight, it takes about 5.5 instructions per key instead of 8
// (callgrind); so does isHistogram.
func isCount(cnt *[isMaxBuckets]int32, keys []int32, shift uint) {
	const m = isMaxBuckets - 1
	shift &= 31 // spares the compiler's guard for shifts of 32 and more
	k := 0
	for ; k+7 < len(keys); k += 8 {
		q := keys[k : k+8 : k+8]
		cnt[(uint32(q[0])>>shift)&m]++
		cnt[(uint32(q[1])>>shift)&m]++
		cnt[(uint32(q[2])>>shift)&m]++
		cnt[(uint32(q[3])>>shift)&m]++
		cnt[(uint32(q[4])>>shift)&m]++
		cnt[(uint32(q[5])>>shift)&m]++
		cnt[(uint32(q[6])>>shift)&m]++
		cnt[(uint32(q[7])>>shift)&m]++
	}
	for _, key := range keys[k:] {
		cnt[(uint32(key)>>shift)&m]++
	}
}

// isScatter moves each key to the next free place of its bucket, bptr
// holding the buckets' next free places. (Unrolling measured no better
// here: the loop's own overhead is small beside the body's.)
func isScatter(dst []int32, bptr *[isMaxBuckets]uint32, keys []int32, shift uint) {
	const m = isMaxBuckets - 1
	shift &= 31
	for _, key := range keys {
		b := (uint32(key) >> shift) & m
		i := bptr[b]
		dst[i] = key
		bptr[b] = i + 1
	}
}

// isHistogram counts in hist[key-minKey] the keys of recv.
func isHistogram(hist, recv []int32, minKey uint32) {
	k := 0
	for ; k+7 < len(recv); k += 8 {
		q := recv[k : k+8 : k+8]
		hist[uint32(q[0])-minKey]++
		hist[uint32(q[1])-minKey]++
		hist[uint32(q[2])-minKey]++
		hist[uint32(q[3])-minKey]++
		hist[uint32(q[4])-minKey]++
		hist[uint32(q[5])-minKey]++
		hist[uint32(q[6])-minKey]++
		hist[uint32(q[7])-minKey]++
	}
	for _, key := range recv[k:] {
		hist[uint32(key)-minKey]++
	}
}

// fullVerify sorts the local keys with the last iteration's cumulative
// counts and checks the order within the rank and across the rank boundary.
func (r *isRank) fullVerify() error {
	local := r.lastLocal
	hist := r.buff1
	// The key array is no longer needed: the sorted keys go there.
	sorted := r.keys
	if local > len(sorted) {
		sorted = make([]int32, local)
	}
	sorted = sorted[:local]
	for _, k := range r.buff2[:local] {
		i := int(k) - r.lastMinKey
		hist[i]--
		sorted[hist[i]] = k
	}
	// The largest key of the previous rank must not exceed our smallest.
	var req *gompj.Request
	prev := []int32{0}
	var err error
	if r.me > 0 {
		if req, err = r.c.Irecv(prev, r.me-1, 1000); err != nil {
			return err
		}
	}
	if r.me < r.np-1 {
		last := []int32{0}
		if local > 0 {
			last[0] = sorted[local-1]
		}
		if err := r.c.Send(last, r.me+1, 1000); err != nil {
			return err
		}
	}
	if req != nil {
		if _, err := req.Wait(); err != nil {
			return err
		}
	}
	bad := 0
	if r.me > 0 && local > 0 && prev[0] > sorted[0] {
		bad++
	}
	for i := 1; i < local; i++ {
		if sorted[i-1] > sorted[i] {
			bad++
		}
	}
	if bad == 0 {
		r.passed++
	}
	return nil
}

// RunIS runs the IS kernel; the number of ranks must be a power of two no
// larger than the number of buckets.
func RunIS(c *gompj.Comm, class byte) (*Result, error) {
	p, ok := isParams(class)
	if !ok {
		return nil, badClass("IS", class)
	}
	np := c.Size()
	if err := needPow2("IS", np); err != nil {
		return nil, err
	}
	if np > 1<<p.bucketsLog2 || np > 1<<(p.totalKeysLog2-2) {
		return nil, fmt.Errorf("%w: IS class %c allows at most %d ranks", ErrProcs, class, 1<<p.bucketsLog2)
	}
	r, err := newISRank(c, class, p)
	if err != nil {
		return nil, err
	}
	defer r.free()
	isGenerateKeys(r.keys, r.maxKey, r.me)

	// One untimed iteration, as NPB does, to touch code and data.
	if err := r.rank(1); err != nil {
		return nil, err
	}
	r.passed = 0

	if err := c.Barrier(); err != nil {
		return nil, err
	}
	t0 := gompj.Wtime()
	for it := 1; it <= isIterations; it++ {
		if err := r.rank(it); err != nil {
			return nil, err
		}
	}
	elapsed := gompj.Wtime() - t0

	if err := r.fullVerify(); err != nil {
		return nil, err
	}
	passed := []int{r.passed}
	total := []int{0}
	if err := c.Allreduce(passed, total, gompj.Sum); err != nil {
		return nil, err
	}
	totalKeys := 1 << p.totalKeysLog2
	res := &Result{
		Kernel: "IS", Class: class,
		Size:       fmt.Sprint(totalKeys),
		Iterations: isIterations,
		OpType:     "keys ranked",
		Checks: []Check{{
			Name:      "tests passed",
			Computed:  float64(total[0]),
			Reference: float64(isTestSize*isIterations + np),
		}},
	}
	if err := finish(c, res, elapsed, float64(isIterations)*float64(totalKeys)); err != nil {
		return nil, err
	}
	return res, nil
}

package bench

import (
	"fmt"

	"github.com/gompj/gompj"
)

// Benchmarks of views and neighbourhood collectives, for the targets of datatype views and topologies:
//
//	view   ranks 0 and 1 ping-pong 4096 blocks of SIZE bytes (float64s), 8 KiB apart (a stride of 1024), three
//	       ways: the same bytes contiguously; as a Vector view, received into a Vector view; packed by hand into a
//	       contiguous buffer, sent, and unpacked by hand. The three take turns, a batch of round trips each, for 15
//	       rounds; the figure is each one's median batch, as half the round trip in microseconds, and the ratios
//	       Vector/Contiguous and Vector/Packed. SIZE 64 is "4096 blocks of 8 float64"; SIZE 8 is a
//	       one-element column.
//	halo   every rank of a 2D periodic process grid (DimsCreate) exchanges a block of SIZE bytes with each of its
//	       four neighbours: by NeighborAlltoall, by the persistent NeighborAlltoallInit (Start and Wait), and by
//	       hand with Irecv/Isend/Waitall after CartShift. Each exchange is timed between barriers, as OSU times a
//	       collective; the three ways take turns, a batch of exchanges each, for 15 rounds, so that a drift of the
//	       machine's speed falls on all three alike. The figure is each way's median batch mean, averaged over the
//	       ranks, and the ratio NeighborAlltoall/Isend.
//
//	gompj bench view -np 2                 # one node: ranks are goroutines of one process
//	GOMPJ_HOST_SHM=0 gompj bench view -np 2 -nodes 2   # two node processes over TCP
//	gompj bench halo -np 4

const viewBlocks, viewStride = 4096, 1024 // float64s

func init() {
	Register(&Benchmark{Name: "view", Title: "gompj Vector view vs contiguous vs hand-packed ping-pong (4096 blocks, stride 1024 float64)",
		MinRanks: 2, Sizes: []int{8, 64, 512, 4096},
		Columns: []string{"Contiguous(us)", "Vector(us)", "Packed(us)", "Vector/Contig", "Vector/Packed"},
		RunRow:  viewRow})
	sizes := []int{}
	for n := 8; n <= 256<<10; n *= 4 {
		sizes = append(sizes, n)
	}
	Register(&Benchmark{Name: "halo", Title: "gompj 2D halo exchange: NeighborAlltoall vs persistent vs Isend/Irecv/Waitall",
		MinRanks: 1, Sizes: sizes, Average: true,
		Columns: []string{"Neighbor(us)", "Persistent(us)", "Isend/Irecv(us)", "Neighbor/Isend"},
		RunRow:  haloRow, Derive: func(row []float64) { row[3] = row[0] / row[2] }})
}

func viewRow(c *gompj.Comm, size int, o *Options) ([]float64, error) {
	if size < 8 || size%8 != 0 || size/8 > viewStride {
		return nil, fmt.Errorf("view: SIZE is the bytes of a block, a multiple of 8 up to %d", viewStride*8)
	}
	bl := size / 8
	n := viewBlocks * bl
	iters, warmup := o.iterations(viewBlocks*size, 1000, 100)
	flat, flatIn := make([]float64, n), make([]float64, n)
	src, dst := make([]float64, viewBlocks*viewStride), make([]float64, viewBlocks*viewStride)
	for i := range src {
		src[i] = float64(i)
	}
	sv, err := gompj.Vector(src, viewBlocks, bl, viewStride)
	if err != nil {
		return nil, err
	}
	dv, err := gompj.Vector(dst, viewBlocks, bl, viewStride)
	if err != nil {
		return nil, err
	}
	var flatAny, flatInAny any = flat, flatIn // boxed once, as a program reusing its buffers would
	pingpong := func(send, recv any, pack, unpack func()) func() error {
		return func() error {
			if c.Rank() == 0 {
				pack()
				if err := c.Send(send, 1, tagData); err != nil {
					return err
				}
				if _, err := c.Recv(recv, 1, tagData); err != nil {
					return err
				}
				unpack()
				return nil
			}
			if _, err := c.Recv(recv, 0, tagData); err != nil {
				return err
			}
			unpack()
			pack()
			return c.Send(send, 0, tagData)
		}
	}
	none := func() {}
	packHand := func() {
		for b := 0; b < viewBlocks; b++ {
			copy(flat[b*bl:(b+1)*bl], src[b*viewStride:b*viewStride+bl])
		}
	}
	if bl == 1 { // a column: the loop a programmer writes for it
		packHand = func() {
			for b := range flat {
				flat[b] = src[b*viewStride]
			}
		}
	}
	unpackHand := func() {
		for b := 0; b < viewBlocks; b++ {
			copy(dst[b*viewStride:b*viewStride+bl], flatIn[b*bl:(b+1)*bl])
		}
	}
	if bl == 1 {
		unpackHand = func() {
			for b, x := range flatIn {
				dst[b*viewStride] = x
			}
		}
	}
	t, err := interleavedPingPongs(c, o, iters, warmup, pingpong(flatAny, flatInAny, none, none), pingpong(sv, dv, none, none),
		pingpong(flatAny, flatInAny, packHand, unpackHand))
	if err != nil {
		return nil, err
	}
	contig, vector, packed := t[0], t[1], t[2]
	if c.Rank() == 1 { // the data went through: the last receive into the view holds rank 0's blocks
		for b := 0; b < viewBlocks; b += 97 {
			if dst[b*viewStride] != src[b*viewStride] {
				return nil, fmt.Errorf("view: block %d arrived as %v, want %v", b, dst[b*viewStride], src[b*viewStride])
			}
		}
	}
	return []float64{contig, vector, packed, vector / contig, vector / packed}, nil
}

// interleavedPingPongs times ping-pong steps of ranks 0 and 1 against each other as interleavedLatencies times
// collectives: each warmed up, then in turn, a batch of iterations each (after an eighth as many untimed, since
// a strided batch leaves the caches and the TLB cold for a contiguous one) for rounds of batches. Each figure is the
// median batch's half round trip in microseconds (rank 0's; other ranks return zeros).
func interleavedPingPongs(c *gompj.Comm, o *Options, iters, warmup int, steps ...func() error) ([]float64, error) {
	batch := max(iters/interleaveRounds, 1)
	if c.Rank() > 1 {
		return make([]float64, len(steps)), nil
	}
	for _, step := range steps {
		if _, err := p2pLoop(c, o, 0, warmup, step); err != nil {
			return nil, err
		}
	}
	timed := *o
	timed.Warmup = 1 // p2pLoop warms up no further
	return interleaved(len(steps), func(i int) (float64, error) {
		t, err := p2pLoop(c, &timed, batch, max(batch/8, 1), steps[i]) // caches warm again after the others
		return t * 1e6 / float64(2*batch), err
	})
}

func haloRow(c *gompj.Comm, size int, o *Options) ([]float64, error) {
	dims, err := gompj.DimsCreate(c.Size(), []int{0, 0})
	if err != nil {
		return nil, err
	}
	g, err := c.CartCreate(dims, []bool{true, true}, false)
	if err != nil {
		return nil, err
	}
	defer g.Free()
	m := floats(size)
	send, recv := make([]float64, 4*m), make([]float64, 4*m)
	var sendAny, recvAny any = send, recv
	nbr := func() error { return g.NeighborAlltoall(sendAny, recvAny) }
	pr, err := g.NeighborAlltoallInit(sendAny, recvAny)
	if err != nil {
		return nil, err
	}
	defer pr.Free()
	persistent := func() error {
		if err := pr.Start(); err != nil {
			return err
		}
		_, err := pr.Wait()
		return err
	}
	// By hand: what goes to the -1 neighbour of a dimension arrives there as the block from its +1 neighbour.
	var minus, plus [2]int
	for d := range 2 {
		if minus[d], plus[d], err = g.CartShift(d, 1); err != nil {
			return nil, err
		}
	}
	blocks := func(b []float64) [4]any {
		return [4]any{b[0:m], b[m : 2*m], b[2*m : 3*m], b[3*m : 4*m]}
	}
	sb, rb := blocks(send), blocks(recv)
	reqs := make([]*gompj.Request, 8)
	byHand := func() error {
		for d := range 2 {
			var err error
			if reqs[4*d], err = g.Irecv(rb[2*d], minus[d], 2*d+1); err != nil { // it sent up
				return err
			}
			if reqs[4*d+1], err = g.Irecv(rb[2*d+1], plus[d], 2*d); err != nil { // it sent down
				return err
			}
			if reqs[4*d+2], err = g.Isend(sb[2*d], minus[d], 2*d); err != nil {
				return err
			}
			if reqs[4*d+3], err = g.Isend(sb[2*d+1], plus[d], 2*d+1); err != nil {
				return err
			}
		}
		return gompj.Waitall(reqs...)
	}
	if o.Algo != "" { // -algo applies to the neighbourhood collective only
		if err := g.ForceAlgorithm("neighbor_alltoall", o.Algo); err != nil {
			return nil, err
		}
		defer g.ForceAlgorithm("neighbor_alltoall", "")
	}
	t, err := interleavedLatencies(g, size, o, nbr, persistent, byHand)
	if err != nil {
		return nil, err
	}
	a, b, h := t[0], t[1], t[2]
	return []float64{a, b, h, a / h}, nil
}

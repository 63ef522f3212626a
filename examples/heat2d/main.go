// Command heat2d solves the steady 2D heat equation on an n×n grid by Jacobi iteration: the plate's top edge is
// held at 1, its other edges at 0, and every interior point becomes the mean of its four neighbours, -iters times.
// The grid is cut into blocks over a Cartesian process grid (DimsCreate, CartCreate); each block keeps a halo of
// one point around it, refreshed from the neighbouring blocks before every sweep, and the residual (the norm of the
// change) is summed over the ranks with Allreduce.
//
// The halo exchange, -halo:
//
//	sendrecv    CartShift gives the neighbours; rows go as they are, columns as Vector views (no packing by hand)
//	neighbor    one NeighborAlltoallv per sweep, the four edges and the four halos as Indexed views
//	persistent  that NeighborAlltoallv made once with NeighborAlltoallvInit and started every sweep
//
// On the plate's edges the neighbour is ProcNull: nothing is received there, so the halo keeps the boundary value.
//
//	gompj run -np 4 ./examples/heat2d -n 512 -iters 1000
package main

import (
	"flag"
	"fmt"
	"math"
	"os"

	"github.com/gompj/gompj"
)

func main() {
	n := flag.Int("n", 256, "the grid is n×n interior points")
	iters := flag.Int("iters", 500, "Jacobi sweeps")
	halo := flag.String("halo", "sendrecv", "halo exchange: sendrecv, neighbor or persistent")
	flag.Parse()
	if *n < 1 || *iters < 0 || (*halo != "sendrecv" && *halo != "neighbor" && *halo != "persistent") {
		flag.Usage()
		os.Exit(2)
	}
	err := gompj.Run(func(c *gompj.Comm) error {
		t0 := gompj.Wtime()
		r, err := solve(c, *n, *iters, *halo)
		if err != nil || r == nil {
			return err
		}
		secs := gompj.Wtime() - t0
		heat := []float64{0}
		if err := r.cart.Reduce([]float64{r.sum()}, heat, gompj.Sum, 0); err != nil {
			return err
		}
		if r.cart.Rank() == 0 {
			fmt.Printf("heat2d: %dx%d grid, %d ranks as %dx%d blocks of about %dx%d, halo exchange %s\n", *n, *n,
				r.cart.Size(), r.dims[0], r.dims[1], *n/r.dims[0], *n/r.dims[1], *halo)
			fmt.Printf("  %d sweeps: residual %.6e, heat %.6f, %.3f s, %.1f Mpoint updates/s\n", *iters, r.residual,
				heat[0], secs, float64(*n)*float64(*n)*float64(*iters)/secs/1e6)
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(gompj.ExitCode(err))
	}
}

// block is one rank's part of the plate: rows × cols interior points at (row0, col0) of the global grid, stored
// with a halo of one point all round, row-major, (rows+2)×(cols+2).
type block struct {
	cart             *gompj.Comm
	dims             []int
	rows, cols       int
	row0, col0       int
	u, next          []float64
	residual         float64 // after the last sweep
	up, down         int     // neighbours along dimension 0 (rows)
	left, right      int     // along dimension 1 (columns)
	w                int     // cols+2: the stride of a row
	sendV, recvV     [2]*gompj.View
	counts, displs   []int
	persistent       [2]*gompj.Request // NeighborAlltoallvInit, one per buffer (u and next alternate)
	haloExchangeKind string
	cur              int // which of the two buffers u is (the views and requests are per buffer)
}

func (b *block) at(i, j int) int { return i*b.w + j }

// split cuts n points into parts as even as possible; part k starts at lo and has size points.
func split(n, parts, k int) (lo, size int) {
	size = n / parts
	extra := n % parts
	lo = k*size + min(k, extra)
	if k < extra {
		size++
	}
	return lo, size
}

// solve runs the iterations on c's ranks and returns this rank's block (nil for a rank outside the process grid).
func solve(c *gompj.Comm, n, iters int, halo string) (*block, error) {
	dims, err := gompj.DimsCreate(c.Size(), []int{0, 0})
	if err != nil {
		return nil, err
	}
	cart, err := c.CartCreate(dims, []bool{false, false}, true)
	if err != nil || cart == nil {
		return nil, err
	}
	coords, err := cart.CartCoords(cart.Rank())
	if err != nil {
		return nil, err
	}
	b := &block{cart: cart, dims: dims, haloExchangeKind: halo}
	b.row0, b.rows = split(n, dims[0], coords[0])
	b.col0, b.cols = split(n, dims[1], coords[1])
	if b.up, b.down, err = cart.CartShift(0, 1); err != nil {
		return nil, err
	}
	if b.left, b.right, err = cart.CartShift(1, 1); err != nil {
		return nil, err
	}
	b.w = b.cols + 2
	size := (b.rows + 2) * b.w
	b.u, b.next = make([]float64, size), make([]float64, size)
	// The boundary: the plate's top edge (the halo row above global row 0) is hot. Both buffers carry it, since
	// the sweeps alternate between them; the ProcNull neighbour above never overwrites it.
	if b.row0 == 0 {
		for j := 0; j < b.w; j++ {
			b.u[b.at(0, j)], b.next[b.at(0, j)] = 1, 1
		}
	}
	if err := b.setupViews(); err != nil {
		return nil, err
	}
	for it := 0; it < iters; it++ {
		if err := b.exchange(); err != nil {
			return nil, err
		}
		local := b.sweep()
		res := []float64{local}
		if err := cart.Allreduce(gompj.InPlace, res, gompj.Sum); err != nil {
			return nil, err
		}
		b.residual = math.Sqrt(res[0])
		b.u, b.next = b.next, b.u
	}
	for _, r := range b.persistent {
		if r != nil {
			r.Free()
		}
	}
	return b, nil
}

// setupViews makes, for each of the two buffers, the views of the neighbourhood exchange: the four interior edges
// to send and the four halos to receive, in the Cartesian order of the neighbours (up, down, left, right), as
// Indexed views (a row is one block, a column one block per element).
func (b *block) setupViews() error {
	if b.haloExchangeKind == "sendrecv" {
		return nil
	}
	edge := func(rowStart, colStart, n, step int) ([]int, []int) { // n points from (rowStart, colStart), step apart
		lens, displs := make([]int, 0, n), make([]int, 0, n)
		for k := 0; k < n; k++ {
			lens = append(lens, 1)
			displs = append(displs, b.at(rowStart, colStart)+k*step)
		}
		return lens, displs
	}
	join := func(parts ...[2][]int) (lens, displs []int) {
		for _, p := range parts {
			lens, displs = append(lens, p[0]...), append(displs, p[1]...)
		}
		return
	}
	pair := func(l, d []int) [2][]int { return [2][]int{l, d} }
	sendLens, sendDispls := join(pair(edge(1, 1, b.cols, 1)), pair(edge(b.rows, 1, b.cols, 1)),
		pair(edge(1, 1, b.rows, b.w)), pair(edge(1, b.cols, b.rows, b.w)))
	recvLens, recvDispls := join(pair(edge(0, 1, b.cols, 1)), pair(edge(b.rows+1, 1, b.cols, 1)),
		pair(edge(1, 0, b.rows, b.w)), pair(edge(1, b.cols+1, b.rows, b.w)))
	b.counts = []int{b.cols, b.cols, b.rows, b.rows}
	b.displs = []int{0, b.cols, 2 * b.cols, 2*b.cols + b.rows}
	for k, buf := range [][]float64{b.u, b.next} {
		var err error
		if b.sendV[k], err = gompj.Indexed(buf, sendLens, sendDispls); err != nil {
			return err
		}
		if b.recvV[k], err = gompj.Indexed(buf, recvLens, recvDispls); err != nil {
			return err
		}
		if b.haloExchangeKind == "persistent" {
			if b.persistent[k], err = b.cart.NeighborAlltoallvInit(b.sendV[k], b.counts, b.displs, b.recvV[k],
				b.counts, b.displs); err != nil {
				return err
			}
		}
	}
	return nil
}

// exchange refreshes u's halo from the neighbours.
func (b *block) exchange() error {
	switch b.haloExchangeKind {
	case "neighbor":
		k := b.cur
		return b.cart.NeighborAlltoallv(b.sendV[k], b.counts, b.displs, b.recvV[k], b.counts, b.displs)
	case "persistent":
		r := b.persistent[b.cur]
		if err := r.Start(); err != nil {
			return err
		}
		_, err := r.Wait()
		return err
	}
	u := b.u
	// rows: contiguous
	if _, err := b.cart.Sendrecv(u[b.at(1, 1):b.at(1, 1+b.cols)], b.up, 0,
		u[b.at(b.rows+1, 1):b.at(b.rows+1, 1+b.cols)], b.down, 0); err != nil {
		return err
	}
	if _, err := b.cart.Sendrecv(u[b.at(b.rows, 1):b.at(b.rows, 1+b.cols)], b.down, 1,
		u[b.at(0, 1):b.at(0, 1+b.cols)], b.up, 1); err != nil {
		return err
	}
	// columns: Vector views, one element per row, a row apart
	col := func(j int) (*gompj.View, error) { return gompj.Vector(u[b.at(1, j):], b.rows, 1, b.w) }
	firstIn, err := col(1)
	if err != nil {
		return err
	}
	lastIn, err := col(b.cols)
	if err != nil {
		return err
	}
	leftHalo, err := col(0)
	if err != nil {
		return err
	}
	rightHalo, err := col(b.cols + 1)
	if err != nil {
		return err
	}
	if _, err := b.cart.Sendrecv(firstIn, b.left, 2, rightHalo, b.right, 2); err != nil {
		return err
	}
	_, err = b.cart.Sendrecv(lastIn, b.right, 3, leftHalo, b.left, 3)
	return err
}

// sweep computes next from u and returns the local sum of squared changes; next then becomes u.
func (b *block) sweep() float64 {
	u, nx, w := b.u, b.next, b.w
	var local float64
	for i := 1; i <= b.rows; i++ {
		for j := 1; j <= b.cols; j++ {
			k := i*w + j
			v := 0.25 * (u[k-w] + u[k+w] + u[k-1] + u[k+1])
			d := v - u[k]
			local += d * d
			nx[k] = v
		}
	}
	b.cur ^= 1
	return local
}

// sum is the total of the block's interior (the plate's heat, summed over the ranks by the caller).
func (b *block) sum() float64 {
	var s float64
	for i := 1; i <= b.rows; i++ {
		for j := 1; j <= b.cols; j++ {
			s += b.u[b.at(i, j)]
		}
	}
	return s
}

// sequential runs the same iterations on one n×n grid with its halo and returns the grid and the residual.
func sequential(n, iters int) ([]float64, float64) {
	w := n + 2
	u, nx := make([]float64, w*w), make([]float64, w*w)
	for j := 0; j < w; j++ {
		u[j], nx[j] = 1, 1
	}
	var res float64
	for it := 0; it < iters; it++ {
		var local float64
		for i := 1; i <= n; i++ {
			for j := 1; j <= n; j++ {
				k := i*w + j
				v := 0.25 * (u[k-w] + u[k+w] + u[k-1] + u[k+1])
				d := v - u[k]
				local += d * d
				nx[k] = v
			}
		}
		res = math.Sqrt(local)
		u, nx = nx, u
	}
	return u, res
}

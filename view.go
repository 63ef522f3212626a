package gompj

import "github.com/gompj/gompj/ranks"

// View is a selection of a slice's elements, in order: MPI's derived datatypes as a view over a Go slice. A *View
// is accepted wherever a buffer is (point-to-point, persistent requests, collectives, neighbourhood collectives).
// A message from a View of k elements of T is k elements of T (MPI's type signature): it may be received into a
// []T of k or more, or into another View of T; into another element type it is ErrType, into fewer elements
// ErrTruncate. A View that reaches past its slice is an error when it is made; one whose blocks overlap may be
// sent, not received into (ErrBuffer).
//
// Views move without packing where the path allows: on one node the copy goes straight from the strided source to
// the strided destination.
type View = ranks.View

// Vector selects count blocks of blockLen consecutive elements of buf, consecutive blocks stride elements apart,
// from buf[0] (MPI_Type_vector). A column of a row-major n×m matrix a is Vector(a[j:], n, 1, m).
func Vector(buf any, count, blockLen, stride int) (*View, error) {
	return ranks.Vector(buf, count, blockLen, stride)
}

// Indexed selects blockLens[i] consecutive elements of buf from element displs[i], in the order given
// (MPI_Type_indexed).
func Indexed(buf any, blockLens, displs []int) (*View, error) {
	return ranks.Indexed(buf, blockLens, displs)
}

// Subarray selects the sub-array of extents subSizes at starts of the row-major array of extents sizes held by buf
// (MPI_Type_create_subarray, C order): a face or a halo of a grid.
func Subarray(buf any, sizes, subSizes, starts []int) (*View, error) {
	return ranks.Subarray(buf, sizes, subSizes, starts)
}

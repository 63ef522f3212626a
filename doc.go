// Package gompj is a hybrid message-passing runtime for Go: programs written in the MPI style (every rank runs the
// same function and talks through a communicator) run unchanged on one multicore box or on a cluster.
//
// One process per node hosts many ranks as goroutines. Ranks on the same node exchange messages through shared
// memory (one copy, straight into the receiver's buffer whenever it can); ranks on different nodes go through the
// node's one network device.
//
//	err := gompj.Run(func(c *gompj.Comm) error {
//		if c.Rank() == 0 {
//			return c.Send([]float64{3.14}, 1, 0)
//		}
//		if c.Rank() == 1 {
//			x := make([]float64, 1)
//			_, err := c.Recv(x, 0, 0)
//			return err
//		}
//		return nil
//	})
//
// Ranks are goroutines: package-level variables of the user's program are shared by every rank of a node. Keep
// per-rank state in the body's locals.
//
// Buffers are slices of the primitive types (byte, int8..int64, uint16..uint64, int, uint, float32, float64,
// complex64, complex128, bool), sent as their memory; any other value is msgpack-encoded by the sender and decoded
// into the pointer the receiver passes. A *View (Vector, Indexed, Subarray) selects elements of a slice and is
// accepted wherever a slice is. Receiving into another type is ErrType, into a shorter slice (or an array into a
// shorter array) ErrTruncate, with what fits delivered.
//
// Virtual topologies (CartCreate, GraphCreate, DistGraphCreateAdjacent) name each rank's neighbours, for the
// neighbourhood collectives (NeighborAllgather, NeighborAlltoall and their v, nonblocking and persistent forms).
//
// The root package is a thin facade: ranks/ holds communicators and point-to-point messaging, collectives/ the
// collective algorithms, node/ the process runtime.
package gompj

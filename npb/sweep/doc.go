// Package sweep runs the NPB kernels over a grid of configurations (kernel, class, process count, placement
// mode), records one row per configuration in a CSV file, and draws Mop/s-versus-np and speedup-versus-np charts
// (PNG and SVG, with gonum.org/v1/plot), with reference figures from another MPI implementation as their own
// series. It is the engine of `gompj npb sweep` and `gompj npb plot`; the command only parses flags and says how
// to start one run (a fresh process of the gompj binary, whose `gompj npb -json` output Run parses).
//
// A Row is one measured or reference configuration. Its CSV form has the columns
//
//	kernel,class,np,nodes,ranks_per_node,device,time_s,mops_total,mops_per_rank,verified,label
//
// and lines starting with # are comments. An empty number (a reference without a time) reads as NaN and is
// written back empty.
//
// Imports: gompj/npb (the kernels' Result and their process-count rules), gonum.org/v1/plot and the standard
// library. Nothing in gompj imports it but cmd/gompj.
package sweep

// Package device is the contract between the rank layer and a node's network devices.
//
// A gompj node process hosts many ranks and talks to the other node processes through devices: netdev over TCP,
// rdma over a verbs-model provider (shared memory between node processes on one host, libfabric for RDMA fabrics).
// Ranks hand inter-node messages to a Device; a device hands inbound traffic to the node through a Sink. Device
// states the rules every device keeps (order per source and destination, completion, re-entrancy, memory), and
// the conformance suite in device/devicetest checks them.
//
// node opens devices by name (Transport), publishes each one's address blob through the bootstrap, routes every
// peer node to exactly one device (Router) and only then starts them with the node's Sink: nothing is delivered
// before the World that receives it exists.
//
// Protocols (the device implements them; the sink only sees their effects):
//   - eager: one message carries the header and the payload; the sink gets it through DeliverEager. A synchronous
//     eager send (FlagSync) completes on the sender's side when the receiver's sink calls Device.Ack after the match.
//   - rendezvous: the sender's device sends a request-to-send (RTS) that the sink sees through DeliverRTS; once the
//     receive is matched the sink calls Device.ClearToSend with the receiver's own slice, the payload moves
//     straight from the sender's slice into it, and both sides' Completers run.
//   - segmented payloads (optional, Segmented): the same protocols over a buffer in pieces (a strided view's
//     blocks, Payload and Pieces), gathered on send and scattered on receive without packing.
//
// Progress: a device with a progress goroutine of its own lets ranks that wait drive it instead (Poller; a driving
// rank that keeps finding nothing yields its core now and then, IdleYield), and runs the node's background work
// between its rounds (Helper).
//
// Imports: internal/mem (its copies of payloads), the standard library.
package device

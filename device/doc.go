// Package device is the contract between the rank layer and a node's network device.
//
// A gompj node process hosts many ranks and exactly one network device (netdev over TCP, or rdma over verbs).
// Ranks hand inter-node messages to the device through Device; the device hands inbound traffic to the node through
// Sink. Everything a second device needs to fit beside netdev is here, and nothing else: no sockets, no matching.
//
// Protocols (the device implements them; the sink only sees their effects):
//   - eager: one frame carries the header and the payload; the sink gets it through DeliverEager. A synchronous
//     eager send (FlagSync) completes on the sender's side when the receiver's sink calls Device.Ack after the match.
//   - rendezvous: the sender's device sends a request-to-send (RTS) that the sink sees through DeliverRTS; once the
//     receive is matched the sink calls Device.ClearToSend with the receiver's own slice, the sender's device writes
//     the payload straight from the sender's slice, the receiving device reads it straight into that slice, and both
//     sides' Completers run.
//   - control: opaque node-to-node messages for bootstrap, barriers, finalize and abort.
//
// Imports: only the standard library.
package device

// Package checkpoint turns a trainer's checkpoint folders into what the
// chain and other parties check them against, and serves them.
//
//   - Commit hashes a folder into its commitment: state_root over the state
//     file's ChunkSize chunks (streaming and parallel, in memory bounded by
//     the worker count, not the file size) and trace_root over its per-step
//     hashes, both with x/verify's Merkle package so they are exactly what
//     the chain verifies.
//   - Catalog holds the checkpoints the provider retains and decides when
//     one may be pruned: never while it can be challenged, while an open
//     challenge needs it, or while a job may still resume from it.
//   - NewHandler serves the retained checkpoints, their chunks and trace
//     hashes with inclusion proofs over HTTP.
//   - Client downloads them and verifies everything against roots the
//     caller takes from the chain.
package checkpoint

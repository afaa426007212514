// Package merkle is depinchain's single implementation of Merkle trees: the
// chain uses it to verify checkpoint trace proofs (x/verify) and storage
// proofs (x/shardregistry), and the off-chain provider daemon uses it to hash
// multi-gigabyte checkpoints and to answer proof challenges. Keeping one
// implementation for both sides guarantees that a root computed by a provider
// is exactly the root the chain checks against.
//
// The tree is the RFC 6962 (Certificate Transparency) SHA-256 tree:
//
//   - a leaf hashes as SHA-256(0x00 || data) and an interior node as
//     SHA-256(0x01 || left || right), so a leaf can never be passed off as a
//     node (second-preimage resistance);
//   - a tree of n > 1 leaves splits into a left subtree holding the largest
//     power of two strictly below n leaves and a right subtree holding the rest;
//   - the empty tree's root is SHA-256 of the empty string.
//
// Inclusion proofs are the RFC 6962 audit paths, verified with the algorithm
// of RFC 9162 section 2.1.3.2. Verification rejects a proof whose length is
// not exactly the one determined by (index, size) before hashing anything, so
// on-chain callers pay for at most [MaxProofDepth] hashes.
//
// Data too large for a single leaf is split into fixed-size chunks (the last
// one possibly shorter), one leaf per chunk. [RootOfBytes] hashes data held in
// memory; [StreamRoot] and [ParallelStreamRoot] hash a stream chunk by chunk
// in memory bounded by the chunk size, independently of the input's length.
package merkle

package types

import (
	"encoding/base32"
	"fmt"
	"strings"

	"github.com/depinchain/depinchain/pkg/merkle"
)

// CID encoding of a piece root. A piece is named on chain by its raw 32-byte Merkle root;
// queries and the CLI also print it as a CIDv1 so that content-addressed tooling can
// carry it:
//
//	multibase "b" (base32, lower case, no padding) of
//	0x01 (CIDv1) || 0x55 (raw codec) || 0x12 (sha2-256) || 0x20 (32 bytes) || root
//
// The multihash is the RFC 6962 Merkle root over the piece's chunk_size chunks, NOT the
// SHA-256 of the piece's bytes: an IPFS node hashing the same bytes as one raw block
// gets a different CID. Every prefix byte is below 0x80, so each varint is one byte.
const (
	cidVersion1   = 0x01
	cidCodecRaw   = 0x55
	multihashSHA2 = 0x12
	cidPrefixLen  = 4
	cidByteLength = cidPrefixLen + merkle.HashSize
)

var cidBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// PieceCID derives the CIDv1 string of a 32-byte piece root; it returns "" for a root
// of any other length.
func PieceCID(root []byte) string {
	if len(root) != merkle.HashSize {
		return ""
	}
	b := make([]byte, 0, cidByteLength)
	b = append(b, cidVersion1, cidCodecRaw, multihashSHA2, merkle.HashSize)
	b = append(b, root...)
	return "b" + cidBase32.EncodeToString(b)
}

// ParsePieceCID is the inverse of PieceCID: it accepts only base32 CIDv1s of the raw
// codec with a 32-byte sha2-256 multihash, and returns the root.
func ParsePieceCID(cid string) ([]byte, error) {
	if !strings.HasPrefix(cid, "b") {
		return nil, fmt.Errorf("cid %q: only base32 (multibase 'b') CIDv1s are accepted", cid)
	}
	b, err := cidBase32.DecodeString(cid[1:])
	if err != nil {
		return nil, fmt.Errorf("cid %q: %w", cid, err)
	}
	if len(b) != cidByteLength || b[0] != cidVersion1 || b[1] != cidCodecRaw || b[2] != multihashSHA2 || b[3] != merkle.HashSize {
		return nil, fmt.Errorf("cid %q: not a CIDv1 of the raw codec with a 32-byte sha2-256 multihash", cid)
	}
	return b[cidPrefixLen:], nil
}

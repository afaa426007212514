package types

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// AuditOutcome is how an audit assignment ended, as x/verify reports it to a verifier's
// record.
type AuditOutcome int

// The outcomes RecordAudit counts.
const (
	AuditAssigned AuditOutcome = iota
	AuditAttested
	AuditChallenged
	AuditReported
	AuditMissed
)

func (o AuditOutcome) String() string {
	switch o {
	case AuditAssigned:
		return "assigned"
	case AuditAttested:
		return "attested"
	case AuditChallenged:
		return "challenged"
	case AuditReported:
		return "reported"
	case AuditMissed:
		return "missed"
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// auditDrawDomain separates the draw's hashes from every other use of the seed.
const auditDrawDomain = "depinchain/stakingext/audit-draw/v1"

// MaxDrawAttempts is how many positions a draw of k auditors tries at most: duplicates
// and excluded positions are skipped, so the loop is bounded whatever the set holds.
func MaxDrawAttempts(k uint32) int { return 16*int(k) + 16 }

// DrawPosition is the position a draw tries at its attempt-th try in a set of size
// verifiers: SHA-256(domain ‖ seed ‖ attempt) read as a big-endian number, modulo the
// size (the modulo bias is below size / 2^64).
func DrawPosition(seed []byte, attempt int, size uint64) uint64 {
	h := sha256.New()
	h.Write([]byte(auditDrawDomain))
	h.Write(seed)
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(attempt))
	h.Write(n[:])
	sum := h.Sum(nil)
	return binary.BigEndian.Uint64(sum[:8]) % size
}

// DrawPositions picks up to k distinct positions in a set of size, in the order drawn,
// skipping those excluded says to skip: the whole draw, reproducible by anyone from the
// seed and the set. It reads no position more than MaxDrawAttempts(k) times.
func DrawPositions(seed []byte, size uint64, k uint32, excluded func(pos uint64) (bool, error)) ([]uint64, error) {
	if size == 0 || k == 0 {
		return nil, nil
	}
	want := min(uint64(k), size)
	chosen := make([]uint64, 0, want)
	seen := map[uint64]bool{}
	for attempt := 0; attempt < MaxDrawAttempts(k) && uint64(len(chosen)) < want; attempt++ {
		pos := DrawPosition(seed, attempt, size)
		if seen[pos] {
			continue
		}
		seen[pos] = true
		skip, err := excluded(pos)
		if err != nil {
			return nil, err
		}
		if !skip {
			chosen = append(chosen, pos)
		}
	}
	return chosen, nil
}

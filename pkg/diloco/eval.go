package diloco

import (
	"fmt"
	"math"

	"github.com/depinchain/depinchain/pkg/exact"
)

// HeldOutBitsPerByte is the exact mean next-token loss of s over up to n
// consecutive non-overlapping windows of context+1 bytes of heldOut,
// in bits per byte (exact.MeanLoss ÷ ln 2).
func HeldOutBitsPerByte(s *exact.State, heldOut []byte, n int) (float64, error) {
	wl := s.Config.Model.Context + 1
	var ws [][]byte
	for off := 0; off+wl <= len(heldOut) && len(ws) < n; off += wl {
		ws = append(ws, heldOut[off:off+wl])
	}
	if len(ws) == 0 {
		return 0, fmt.Errorf("%w: %d held-out bytes, need at least %d", ErrInvalid, len(heldOut), wl)
	}
	q, err := exact.MeanLoss(s, ws, 0)
	if err != nil {
		return 0, err
	}
	return exact.LossNats(q) / math.Ln2, nil
}

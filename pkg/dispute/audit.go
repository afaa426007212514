package dispute

import (
	"bytes"
	"fmt"

	"github.com/depinchain/depinchain/pkg/trace"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// Attest is an auditor's answer when its own trace of checkpoint cp has the provider's
// root: it commits that root. A trace with another root is a reason to challenge
// (Challenge), not to attest, and is refused here as it would be on chain.
func Attest(sender string, cp verifytypes.Checkpoint, tr trace.Trace) (*verifytypes.MsgAttest, error) {
	if tr.Start != cp.StartStep || tr.End() != cp.EndStep {
		return nil, fmt.Errorf("the trace covers steps %d..%d but the checkpoint covers %d..%d", tr.Start, tr.End(), cp.StartStep, cp.EndStep)
	}
	root := tr.Root()
	if !bytes.Equal(root[:], cp.TraceRoot) {
		return nil, fmt.Errorf("your trace's root %X is not the checkpoint's %X: challenge it instead of attesting", root, cp.TraceRoot)
	}
	return &verifytypes.MsgAttest{Auditor: sender, LeaseId: cp.LeaseId, CheckpointIndex: cp.Index, TraceRoot: root[:]}, nil
}

// ClaimTimeout ends a game whose party to move missed its deadline (or whose checkpoint
// another game already rejected); anyone may send it.
func ClaimTimeout(sender string, challengeID uint64) *verifytypes.MsgClaimTimeout {
	return &verifytypes.MsgClaimTimeout{Sender: sender, ChallengeId: challengeID}
}

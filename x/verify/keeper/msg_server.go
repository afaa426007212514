package keeper

import (
	"context"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/verify/types"
)

// msgServer is the x/verify Msg service. Every handler has one shape: parse the
// message's addresses (keeperutil.ParseAddress), call the keeper method that checks the
// message against state and applies it, and answer with keeperutil.Respond (the
// response and the message's typed event). The keeper methods validate everything
// before their first write or transfer, so a rejected message changes nothing. A game
// move's events (EventHashRevealed, EventGameTurn, EventStepExecuted,
// EventChallengeResolved …) are emitted by the game itself, in the order its state
// changes, because the end blocker moves games too.
type msgServer struct {
	k Keeper
}

var _ types.MsgServer = msgServer{}

// NewMsgServerImpl returns the x/verify Msg service.
func NewMsgServerImpl(k Keeper) types.MsgServer { return msgServer{k: k} }

func (s msgServer) SubmitCheckpoint(ctx context.Context, msg *types.MsgSubmitCheckpoint) (*types.MsgSubmitCheckpointResponse, error) {
	cp, err := s.k.submitCheckpoint(sdk.UnwrapSDKContext(ctx), msg)
	if err != nil {
		return nil, err
	}
	return keeperutil.Respond(ctx, &types.MsgSubmitCheckpointResponse{}, &types.EventCheckpointSubmitted{
		LeaseId: cp.LeaseId, Index: cp.Index, JobId: cp.JobId, Provider: cp.Provider,
		StartStep: cp.StartStep, EndStep: cp.EndStep, StartHash: cp.StartHash, FinalHash: cp.FinalHash,
		StateRoot: cp.StateRoot, TraceRoot: cp.TraceRoot, Uri: cp.Uri, ChallengeDeadline: cp.ChallengeDeadline, Claim: cp.Claim,
	})
}

func (s msgServer) Challenge(ctx context.Context, msg *types.MsgChallenge) (*types.MsgChallengeResponse, error) {
	challenger, challengerText, err := keeperutil.ParseAddressCanonical(s.k.addressCodec, "challenger", msg.Challenger)
	if err != nil {
		return nil, err
	}
	canonical := *msg
	canonical.Challenger = challengerText
	id, err := s.k.openChallenge(sdk.UnwrapSDKContext(ctx), challenger, &canonical)
	if err != nil {
		return nil, err
	}
	return &types.MsgChallengeResponse{ChallengeId: id}, nil
}

func (s msgServer) RevealHash(ctx context.Context, msg *types.MsgRevealHash) (*types.MsgRevealHashResponse, error) {
	if err := s.k.revealHash(sdk.UnwrapSDKContext(ctx), msg); err != nil {
		return nil, err
	}
	return &types.MsgRevealHashResponse{}, nil
}

func (s msgServer) Respond(ctx context.Context, msg *types.MsgRespond) (*types.MsgRespondResponse, error) {
	agreed, err := s.k.respond(sdk.UnwrapSDKContext(ctx), msg)
	if err != nil {
		return nil, err
	}
	return &types.MsgRespondResponse{Agreed: agreed}, nil
}

func (s msgServer) Step(ctx context.Context, msg *types.MsgStep) (*types.MsgStepResponse, error) {
	outcome, err := s.k.executeStep(sdk.UnwrapSDKContext(ctx), msg)
	if err != nil {
		return nil, err
	}
	return &types.MsgStepResponse{Outcome: outcome}, nil
}

func (s msgServer) ClaimTimeout(ctx context.Context, msg *types.MsgClaimTimeout) (*types.MsgClaimTimeoutResponse, error) {
	if _, err := keeperutil.ParseAddress(s.k.addressCodec, "sender", msg.Sender); err != nil {
		return nil, err
	}
	outcome, err := s.k.claimTimeout(sdk.UnwrapSDKContext(ctx), msg)
	if err != nil {
		return nil, err
	}
	return &types.MsgClaimTimeoutResponse{Outcome: outcome}, nil
}

func (s msgServer) Attest(ctx context.Context, msg *types.MsgAttest) (*types.MsgAttestResponse, error) {
	_, auditor, err := keeperutil.ParseAddressCanonical(s.k.addressCodec, "auditor", msg.Auditor)
	if err != nil {
		return nil, err
	}
	canonical := *msg
	canonical.Auditor = auditor
	if err := s.k.attest(sdk.UnwrapSDKContext(ctx), &canonical); err != nil {
		return nil, err
	}
	return keeperutil.Respond(ctx, &types.MsgAttestResponse{}, &types.EventAuditAttested{
		LeaseId: msg.LeaseId, CheckpointIndex: msg.CheckpointIndex, Auditor: auditor, TraceRoot: msg.TraceRoot,
	})
}

func (s msgServer) ReportUnavailable(ctx context.Context, msg *types.MsgReportUnavailable) (*types.MsgReportUnavailableResponse, error) {
	_, auditor, err := keeperutil.ParseAddressCanonical(s.k.addressCodec, "auditor", msg.Auditor)
	if err != nil {
		return nil, err
	}
	canonical := *msg
	canonical.Auditor = auditor
	sdkCtx := sdk.UnwrapSDKContext(ctx)
	cp, err := s.k.reportUnavailable(sdkCtx, &canonical)
	if err != nil {
		return nil, err
	}
	params, err := s.k.Params.Get(ctx)
	if err != nil {
		return nil, err
	}
	withheld := params.Withheld(cp.UnavailableReports, cp.Auditors)
	return keeperutil.Respond(ctx, &types.MsgReportUnavailableResponse{Withheld: withheld}, &types.EventUnavailabilityReported{
		LeaseId: cp.LeaseId, CheckpointIndex: cp.Index, Auditor: auditor, Reports: cp.UnavailableReports, Auditors: cp.Auditors, Withheld: withheld,
	})
}

func (s msgServer) UpdateParams(ctx context.Context, msg *types.MsgUpdateParams) (*types.MsgUpdateParamsResponse, error) {
	if err := s.k.updateParams(ctx, msg); err != nil {
		return nil, err
	}
	return keeperutil.Respond(ctx, &types.MsgUpdateParamsResponse{}, &types.EventParamsUpdated{Params: msg.Params})
}

// Phases 2–3 (tiles.go).

func (s msgServer) CommitRecords(ctx context.Context, msg *types.MsgCommitRecords) (*types.MsgCommitRecordsResponse, error) {
	if _, err := keeperutil.ParseAddress(s.k.addressCodec, "sender", msg.Sender); err != nil {
		return nil, err
	}
	if err := s.k.commitRecords(sdk.UnwrapSDKContext(ctx), msg); err != nil {
		return nil, err
	}
	return &types.MsgCommitRecordsResponse{}, nil
}

func (s msgServer) RevealNode(ctx context.Context, msg *types.MsgRevealNode) (*types.MsgRevealNodeResponse, error) {
	if _, err := keeperutil.ParseAddress(s.k.addressCodec, "sender", msg.Sender); err != nil {
		return nil, err
	}
	if err := s.k.revealNode(sdk.UnwrapSDKContext(ctx), msg); err != nil {
		return nil, err
	}
	return &types.MsgRevealNodeResponse{}, nil
}

func (s msgServer) OpenRecord(ctx context.Context, msg *types.MsgOpenRecord) (*types.MsgOpenRecordResponse, error) {
	if _, err := keeperutil.ParseAddress(s.k.addressCodec, "sender", msg.Sender); err != nil {
		return nil, err
	}
	if err := s.k.openRecord(sdk.UnwrapSDKContext(ctx), msg); err != nil {
		return nil, err
	}
	return &types.MsgOpenRecordResponse{}, nil
}

func (s msgServer) RevealChunk(ctx context.Context, msg *types.MsgRevealChunk) (*types.MsgRevealChunkResponse, error) {
	if _, err := keeperutil.ParseAddress(s.k.addressCodec, "provider", msg.Provider); err != nil {
		return nil, err
	}
	if err := s.k.revealChunk(sdk.UnwrapSDKContext(ctx), msg); err != nil {
		return nil, err
	}
	return &types.MsgRevealChunkResponse{}, nil
}

func (s msgServer) ProveTile(ctx context.Context, msg *types.MsgProveTile) (*types.MsgProveTileResponse, error) {
	if _, err := keeperutil.ParseAddress(s.k.addressCodec, "challenger", msg.Challenger); err != nil {
		return nil, err
	}
	outcome, err := s.k.proveTile(sdk.UnwrapSDKContext(ctx), msg)
	if err != nil {
		return nil, err
	}
	return &types.MsgProveTileResponse{Outcome: outcome}, nil
}

func (s msgServer) ProveParityFault(ctx context.Context, msg *types.MsgProveParityFault) (*types.MsgProveParityFaultResponse, error) {
	prover, err := keeperutil.ParseAddress(s.k.addressCodec, "prover", msg.Prover)
	if err != nil {
		return nil, err
	}
	if err := s.k.proveParityFault(sdk.UnwrapSDKContext(ctx), prover, msg); err != nil {
		return nil, err
	}
	return &types.MsgProveParityFaultResponse{}, nil
}

func (s msgServer) ProveRoundFault(ctx context.Context, msg *types.MsgProveRoundFault) (*types.MsgProveRoundFaultResponse, error) {
	prover, err := keeperutil.ParseAddress(s.k.addressCodec, "prover", msg.Prover)
	if err != nil {
		return nil, err
	}
	if err := s.k.proveRoundFault(sdk.UnwrapSDKContext(ctx), prover, msg); err != nil {
		return nil, err
	}
	return &types.MsgProveRoundFaultResponse{}, nil
}

func (s msgServer) OpenFileQuery(ctx context.Context, msg *types.MsgOpenFileQuery) (*types.MsgOpenFileQueryResponse, error) {
	challenger, challengerText, err := keeperutil.ParseAddressCanonical(s.k.addressCodec, "challenger", msg.Challenger)
	if err != nil {
		return nil, err
	}
	id, err := s.k.openFileQuery(sdk.UnwrapSDKContext(ctx), challenger, challengerText, msg)
	if err != nil {
		return nil, err
	}
	return &types.MsgOpenFileQueryResponse{QueryId: id}, nil
}

func (s msgServer) AnswerFileQuery(ctx context.Context, msg *types.MsgAnswerFileQuery) (*types.MsgAnswerFileQueryResponse, error) {
	sender, err := keeperutil.ParseAddress(s.k.addressCodec, "sender", msg.Sender)
	if err != nil {
		return nil, err
	}
	if err := s.k.answerFileQuery(sdk.UnwrapSDKContext(ctx), sender, msg); err != nil {
		return nil, err
	}
	return &types.MsgAnswerFileQueryResponse{}, nil
}

func (s msgServer) DescendFileQuery(ctx context.Context, msg *types.MsgDescendFileQuery) (*types.MsgDescendFileQueryResponse, error) {
	challenger, err := keeperutil.ParseAddress(s.k.addressCodec, "challenger", msg.Challenger)
	if err != nil {
		return nil, err
	}
	if err := s.k.descendFileQuery(sdk.UnwrapSDKContext(ctx), challenger, msg); err != nil {
		return nil, err
	}
	return &types.MsgDescendFileQueryResponse{}, nil
}

package cmd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cosmos/cosmos-sdk/types/query"

	"github.com/depinchain/depinchain/pkg/custody/fetch"
	"github.com/depinchain/depinchain/pkg/diloco"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// What `job fetch` writes into --out for a job that trains in rounds.
const (
	fetchedGlobalFile     = "global"
	fetchedGlobalInfoFile = "global.json"
)

// FetchedGlobal is DIR/global.json.
type FetchedGlobal struct {
	JobID uint64 `json:"job_id"`
	// Round is R of G_R: the global the round R starts from, after R outer steps.
	Round uint64 `json:"round"`
	// Step is the inner step G_R stands at (R·every).
	Step          uint64 `json:"step"`
	GlobalRoot    string `json:"global_root"`
	GlobalBytes   uint64 `json:"global_bytes"`
	StateRoot     string `json:"state_root"`
	CustodyObject string `json:"custody_object"`
	Holders       int    `json:"pieces_with_holders"`
	DataPieces    uint32 `json:"data_pieces"`
	ParityPieces  uint32 `json:"parity_pieces"`
}

// global fetches G_round of a job that trains in rounds (round nil: the newest final
// global) from its custody holders, checked against the chain's root.
func (f *jobFetch) global(ctx context.Context, job markettypes.Job, round *uint64, out string) error {
	r, root, err := f.finalGlobal(ctx, job, round)
	if err != nil {
		return err
	}
	obj, err := fetch.LocateObject(ctx, f.shards, markettypes.GlobalCustodyID(job.Id, r))
	if err != nil {
		return fmt.Errorf("the custody object of G_%d: %w", r, err)
	}
	if !bytes.Equal(obj.Custody.StateRoot, root) {
		return fmt.Errorf("custody object %s holds %x, G_%d of job %d is %x", obj.DatasetID, obj.Custody.StateRoot, r, job.Id, root)
	}
	fmt.Fprintf(f.log, "global model G_%d of job %d: %d bytes in %d+%d pieces of %d bytes, %d pieces held\n",
		r, job.Id, obj.Layout.StateSize, obj.Layout.DataPieces, obj.Layout.ParityPieces, obj.Layout.PieceSize, obj.Live())
	path := filepath.Join(out, fetchedGlobalFile)
	if err := f.rebuild(ctx, obj, root, path); err != nil {
		return err
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	g, err := diloco.DecodeGlobal(raw)
	if err != nil {
		return fmt.Errorf("G_%d of job %d: %w", r, job.Id, err)
	}
	if g.Round != r {
		return fmt.Errorf("the file of G_%d of job %d says round %d", r, job.Id, g.Round)
	}
	model := g.Model()
	if err := os.WriteFile(filepath.Join(out, fetchedStateFile), model.Encode(), 0o644); err != nil {
		return err
	}
	info := FetchedGlobal{
		JobID: job.Id, Round: r, Step: model.Step, GlobalRoot: fmt.Sprintf("%x", root), GlobalBytes: obj.Layout.StateSize,
		StateRoot: model.Root().Hex(), CustodyObject: obj.DatasetID, Holders: obj.Live(),
		DataPieces: obj.Layout.DataPieces, ParityPieces: obj.Layout.ParityPieces,
	}
	if err := writeFetchedInfo(out, fetchedGlobalInfoFile, info); err != nil {
		return err
	}
	fmt.Fprintf(f.log, "verified: global root %x; wrote %s and its weights as the state %s (step %d)\n",
		root, path, filepath.Join(out, fetchedStateFile), model.Step)
	return nil
}

// finalGlobal is the round and root of the global to fetch: G_want, which must be final
// (the aggregation of round want−1, past its challenge window), or with want nil the
// newest final one. G_0 is computed from the job's seed and is in no custody.
func (f *jobFetch) finalGlobal(ctx context.Context, job markettypes.Job, want *uint64) (uint64, []byte, error) {
	if want != nil && *want == 0 {
		return 0, nil, fmt.Errorf("--round 0: G_0 is the job's initial state (its seed's), not trained and not in custody; rounds start at 1")
	}
	var best *markettypes.Round
	var next []byte
	for {
		res, err := f.market.Rounds(ctx, &markettypes.QueryRoundsRequest{JobId: job.Id, Pagination: &query.PageRequest{Key: next, Limit: 200}})
		if err != nil {
			return 0, nil, fmt.Errorf("the rounds of job %d: %w", job.Id, err)
		}
		for i := range res.Rounds {
			rd := &res.Rounds[i]
			if rd.State != markettypes.ROUND_STATE_FINAL || (want != nil && rd.Round+1 != *want) {
				continue
			}
			if best == nil || rd.Round > best.Round {
				best = rd
			}
		}
		if res.Pagination == nil || len(res.Pagination.NextKey) == 0 {
			break
		}
		next = res.Pagination.NextKey
	}
	switch {
	case best != nil:
		return best.Round + 1, best.NextGlobalRoot, nil
	case want != nil:
		return 0, nil, fmt.Errorf("job %d has no final G_%d (round %d's aggregation is not final, or the job has %d rounds)", job.Id, *want, *want-1, job.Spec.Rounds())
	default:
		return 0, nil, fmt.Errorf("job %d has no final global model yet (it is at round %d of %d)", job.Id, job.Round, job.Spec.Rounds())
	}
}

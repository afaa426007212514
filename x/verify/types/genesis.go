package types

import "fmt"

// DefaultGenesis has default params and no checkpoints.
func DefaultGenesis() *GenesisState {
	return &GenesisState{Params: DefaultParams(), NextChallengeId: 1, NextFileQueryId: 1}
}

type cpKey struct{ lease, index uint64 }

// Validate checks params and the consistency of checkpoints, challenges and openings.
func (gs GenesisState) Validate() error {
	if err := gs.Params.Validate(); err != nil {
		return fmt.Errorf("params: %w", err)
	}
	checkpoints := map[cpKey]Checkpoint{}
	for _, cp := range gs.Checkpoints {
		k := cpKey{cp.LeaseId, cp.Index}
		if _, dup := checkpoints[k]; dup {
			return fmt.Errorf("checkpoint %d/%d: duplicate", cp.LeaseId, cp.Index)
		}
		if cp.EndStep <= cp.StartStep {
			return fmt.Errorf("checkpoint %d/%d: end_step must exceed start_step", cp.LeaseId, cp.Index)
		}
		for name, h := range map[string][]byte{"final_hash": cp.FinalHash, "trace_root": cp.TraceRoot, "state_root": cp.StateRoot} {
			if len(h) != 32 {
				return fmt.Errorf("checkpoint %d/%d: %s must be 32 bytes", cp.LeaseId, cp.Index, name)
			}
		}
		checkpoints[k] = cp
	}
	open := map[cpKey]uint32{}
	ids := map[uint64]bool{}
	for _, ch := range gs.Challenges {
		if ch.Id == 0 || ch.Id >= gs.NextChallengeId || ids[ch.Id] {
			return fmt.Errorf("challenge %d: id must be unique and in [1, next_challenge_id)", ch.Id)
		}
		ids[ch.Id] = true
		if _, ok := checkpoints[cpKey{ch.LeaseId, ch.CheckpointIndex}]; !ok {
			return fmt.Errorf("challenge %d: unknown checkpoint %d/%d", ch.Id, ch.LeaseId, ch.CheckpointIndex)
		}
		if ch.Outcome == CHALLENGE_OUTCOME_UNSPECIFIED {
			open[cpKey{ch.LeaseId, ch.CheckpointIndex}]++
		}
	}
	for k, cp := range checkpoints {
		if cp.OpenChallenges != open[k] {
			return fmt.Errorf("checkpoint %d/%d: open_challenges %d but %d open challenges", k.lease, k.index, cp.OpenChallenges, open[k])
		}
	}
	for _, o := range gs.Openings {
		cp, ok := checkpoints[cpKey{o.LeaseId, o.CheckpointIndex}]
		if !ok || o.Step <= cp.StartStep || o.Step >= cp.EndStep || len(o.Hash) != 32 || o.RevealedHeight < 0 {
			return fmt.Errorf("opening of step %d on checkpoint %d/%d: no such checkpoint, step outside it, bad hash or negative height", o.Step, o.LeaseId, o.CheckpointIndex)
		}
	}
	if err := gs.validateTileGames(ids); err != nil {
		return err
	}
	if err := gs.validateFileQueries(); err != nil {
		return err
	}
	return gs.validateAudits(checkpoints)
}

// validateTileGames checks that each phase 2–3 state belongs to a challenge, once, and
// that its hashes are hashes.
func (gs GenesisState) validateTileGames(challenges map[uint64]bool) error {
	seen := map[uint64]bool{}
	for _, tg := range gs.TileGames {
		if !challenges[tg.ChallengeId] || seen[tg.ChallengeId] {
			return fmt.Errorf("tile game of challenge %d: no such challenge, or a second state for it", tg.ChallengeId)
		}
		seen[tg.ChallengeId] = true
		for name, h := range map[string][]byte{
			"challenger_record_root": tg.ChallengerRecordRoot, "provider_record_root": tg.ProviderRecordRoot,
			"provider_node": tg.ProviderNode, "challenger_node": tg.ChallengerNode, "provider_left": tg.ProviderLeft,
			"provider_right": tg.ProviderRight, "provider_output_root": tg.ProviderOutputRoot, "challenger_output_root": tg.ChallengerOutputRoot,
		} {
			if len(h) != 0 && len(h) != 32 {
				return fmt.Errorf("tile game of challenge %d: %s must be 32 bytes or empty", tg.ChallengeId, name)
			}
		}
		if tg.Lo > tg.Hi || tg.Hi > tg.Entries && tg.Phase == TILE_PHASE_OPERATORS || len(tg.ProviderChunk) > 4096 {
			return fmt.Errorf("tile game of challenge %d: range [%d, %d) outside its %d entries, or a chunk over 4096 bytes", tg.ChallengeId, tg.Lo, tg.Hi, tg.Entries)
		}
	}
	return nil
}

// validateAudits checks that every assignment belongs to a checkpoint, once per auditor,
// and that each checkpoint counts its auditors and reports right.
func (gs GenesisState) validateAudits(checkpoints map[cpKey]Checkpoint) error {
	type auditKey struct {
		lease, index uint64
		auditor      string
	}
	seen := map[auditKey]bool{}
	auditors, reports := map[cpKey]uint32{}, map[cpKey]uint32{}
	for i, a := range gs.Audits {
		k := cpKey{a.LeaseId, a.CheckpointIndex}
		cp, ok := checkpoints[k]
		if !ok {
			return fmt.Errorf("audits[%d]: unknown checkpoint %d/%d", i, a.LeaseId, a.CheckpointIndex)
		}
		if a.Auditor == "" || seen[auditKey{a.LeaseId, a.CheckpointIndex, a.Auditor}] {
			return fmt.Errorf("audits[%d]: auditor of checkpoint %d/%d missing or listed twice", i, a.LeaseId, a.CheckpointIndex)
		}
		seen[auditKey{a.LeaseId, a.CheckpointIndex, a.Auditor}] = true
		if _, ok := AuditStatus_name[int32(a.Status)]; !ok || a.Status == AUDIT_STATUS_UNSPECIFIED {
			return fmt.Errorf("audits[%d]: status %d", i, a.Status)
		}
		if !a.Fee.IsValid() || a.JobId != cp.JobId || a.Provider != cp.Provider {
			return fmt.Errorf("audits[%d]: fee %s invalid, or job/provider not its checkpoint's", i, a.Fee)
		}
		auditors[k]++
		if a.Status == AUDIT_STATUS_REPORTED {
			reports[k]++
		}
	}
	for k, cp := range checkpoints {
		if cp.Auditors != auditors[k] || cp.UnavailableReports != reports[k] {
			return fmt.Errorf("checkpoint %d/%d: counts %d auditors and %d reports, the audits %d and %d",
				k.lease, k.index, cp.Auditors, cp.UnavailableReports, auditors[k], reports[k])
		}
	}
	return nil
}

// validateFileQueries checks that each open file query has a unique id below
// next_file_query_id, is its challenger's only one on its file, and is a descent in
// progress: a range inside the file, hashes that are hashes (the worker's children while
// the challenger chooses), a deposit, and at the proof's turn the revealed chunk.
func (gs GenesisState) validateFileQueries() error {
	type fileKey struct {
		job, round uint64
		worker     uint32
		file       RoundFile
		challenger string
	}
	ids, files := map[uint64]bool{}, map[fileKey]bool{}
	for _, q := range gs.FileQueries {
		fk := fileKey{q.JobId, q.Round, q.Worker, q.File, q.Challenger}
		switch {
		case q.Id == 0 || q.Id >= gs.NextFileQueryId || ids[q.Id]:
			return fmt.Errorf("file query %d: id must be unique and in [1, next_file_query_id %d)", q.Id, gs.NextFileQueryId)
		case files[fk]:
			return fmt.Errorf("file query %d: %s's second open query on the %s of job %d round %d worker %d", q.Id, q.Challenger, q.File, q.JobId, q.Round, q.Worker)
		case q.File != ROUND_FILE_START && q.File != ROUND_FILE_ERROR_OUT:
			return fmt.Errorf("file query %d: file %s is not a round file", q.Id, q.File)
		case q.Turn != FILE_QUERY_TURN_WORKER && q.Turn != FILE_QUERY_TURN_CHALLENGER && q.Turn != FILE_QUERY_TURN_PROVE:
			return fmt.Errorf("file query %d: turn %s is not a party's", q.Id, q.Turn)
		case (q.Turn == FILE_QUERY_TURN_PROVE) != (len(q.Chunk) > 0) || (q.Turn == FILE_QUERY_TURN_PROVE && q.Hi != q.Lo+1) || len(q.Chunk) > 4096:
			return fmt.Errorf("file query %d: a revealed chunk (at most 4096 bytes) is held exactly at the proof's turn, at one chunk", q.Id)
		case q.Lo >= q.Hi || q.Hi > q.Size_:
			return fmt.Errorf("file query %d: range [%d, %d) is not inside the file's %d chunks", q.Id, q.Lo, q.Hi, q.Size_)
		case q.Challenger == "" || q.Provider == "":
			return fmt.Errorf("file query %d: challenger and provider must be set", q.Id)
		case !q.Deposit.IsValid() || !q.Deposit.IsPositive():
			return fmt.Errorf("file query %d: deposit %s must be a positive coin", q.Id, q.Deposit)
		case len(q.Root) != 32 || len(q.Node) != 32:
			return fmt.Errorf("file query %d: root and node must be 32 bytes", q.Id)
		}
		children := 0
		if q.Turn == FILE_QUERY_TURN_CHALLENGER {
			children = 32
		}
		if len(q.Left) != children || len(q.Right) != children {
			return fmt.Errorf("file query %d: left and right must be %d bytes at the %s's turn", q.Id, children, q.Turn)
		}
		for i, h := range q.Path {
			if len(h) != 32 {
				return fmt.Errorf("file query %d: path[%d] must be 32 bytes", q.Id, i)
			}
		}
		ids[q.Id], files[fk] = true, true
	}
	return nil
}

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	banktypes "github.com/cosmos/cosmos-sdk/x/bank/types"

	"github.com/depinchain/depinchain/testutil/localnet"
	"github.com/depinchain/depinchain/testutil/localnet/sidecar"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// cheatFromStep is where the cheating provider stops training and makes its
// hashes up.
const cheatFromStep = 40

// fraudJobYAML is kind reference: the exact transformer's fixed small configuration
// (exact.ReferenceConfig), trained on the built-in corpus.
const fraudJobYAML = `# A short reference-workload run: 4 checkpoints of 16 steps.
name: tiny-lm-verified
gpu:
  models: [H100-SXM5-80GB]
  min_vram_gib: 80
  per_worker: 1
workload:
  kind: reference
total_steps: 64
checkpoint_every: 16
max_price_per_gpu_hour: 3000000udepin
max_duration: 2h
bidding_window_blocks: 4
audit:
  auditors: 0   # the verifier re-executes every checkpoint on its own
`

var fraudStory = scenario{
	title: "a cheating provider caught by a verifier, with nobody at the keyboard",
	accounts: map[string]int64{
		"owner": 1_000_000_000, "honest": 200_000_000, "honest-hot": 1_000_000,
		"cheater": 200_000_000, "cheater-hot": 1_000_000, "verifier": 200_000_000, "verifier-hot": 1_000_000,
	},
	genesis: func(app map[string]any) error {
		params := app["verify"].(map[string]any)["params"].(map[string]any)
		params["challenge_window"] = "8"
		params["move_timeout"] = "10"
		return nil
	},
	tell: tellFraud,
}

func tellFraud(ctx context.Context, s *story, n *localnet.Node, demoDir string) ([]*sidecar.Provider, error) {
	conn, err := grpc.NewClient(n.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	mq, vq, pq, bq := markettypes.NewQueryClient(conn), verifytypes.NewQueryClient(conn),
		stakingexttypes.NewQueryClient(conn), banktypes.NewQueryClient(conn)
	balance := func(addr string) int64 {
		res, err := bq.Balance(ctx, &banktypes.QueryBalanceRequest{Address: addr, Denom: denom})
		if err != nil {
			return 0
		}
		return res.Balance.Amount.Int64()
	}

	s.section("1. Three sidecars join")
	s.say("Each runs depinprovider with its own hot key, granted over x/authz by its operator:")
	var sidecars []*sidecar.Provider
	setup := func(name, role string, opts sidecar.Options) (*sidecar.Provider, error) {
		opts.Home, opts.Operator, opts.HotKey = filepath.Join(demoDir, name), name, name+"-hot"
		p, err := sidecar.Setup(ctx, n, opts)
		if err != nil {
			return nil, err
		}
		sidecars = append(sidecars, p)
		s.detail("%-9s %s  %s", name, p.Operator, role)
		return p, nil
	}
	cheater, err := setup("cheater", fmt.Sprintf("bonds 100 DEPIN, asks 1 DEPIN/GPU-hour; fabricates its hashes from step %d", cheatFromStep),
		sidecar.Options{Bond: "100000000udepin", Prices: map[string]uint64{gpuModel: 1_000_000},
			StartArgs: []string{"--cheat-fabricate-from-step", fmt.Sprint(cheatFromStep)}})
	if err != nil {
		return sidecars, err
	}
	honest, err := setup("honest", "bonds 100 DEPIN, asks 2 DEPIN/GPU-hour; trains honestly",
		sidecar.Options{Bond: "100000000udepin", Prices: map[string]uint64{gpuModel: 2_000_000}})
	if err != nil {
		return sidecars, err
	}
	verifier, err := setup("verifier", "no GPUs; re-executes every reference checkpoint",
		sidecar.Options{Prices: map[string]uint64{}, Set: map[string]string{
			"verifier.enabled": "true", "verifier.policy": `"all"`, "gpus.source": `"none"`,
		}})
	if err != nil {
		return sidecars, err
	}
	s.say("Providers serve checkpoint states only to the job's owner and the bonded, so the verifier bonds:")
	if _, err := s.tx(ctx, n, "verifier", "stakingext", "register-verifier", "100000000"+denom); err != nil {
		return sidecars, err
	}
	for _, p := range sidecars {
		if err := p.Start(ctx); err != nil {
			return sidecars, err
		}
	}
	s.say("All three follow the chain. The cheater's mode is a hidden test flag; nothing else about it differs.")
	verifierBefore := balance(verifier.Operator)
	cheaterBond := bondOf(ctx, pq, cheater.Operator)

	s.section("2. A job lands on the cheater")
	specPath := filepath.Join(demoDir, "job.yaml")
	if err := os.WriteFile(specPath, []byte(fraudJobYAML), 0o644); err != nil {
		return sidecars, err
	}
	s.block(fraudJobYAML)
	res, err := s.tx(ctx, n, "owner", "market", "submit-job", "--spec", specPath, "--deposit", deposit)
	if err != nil {
		return sidecars, err
	}
	jobIDText, _ := res.Attr("depinchain.market.v1.EventJobCreated", "job_id")
	jobID := uint64(mustInt(strings.Trim(jobIDText, `"`)))
	var first markettypes.Lease
	if err := poll(ctx, "a lease on the job", time.Minute, func() (bool, error) {
		ls, err := mq.Leases(ctx, &markettypes.QueryLeasesRequest{JobId: jobID})
		if err != nil || len(ls.Leases) == 0 {
			return false, err
		}
		first = ls.Leases[0]
		return true, nil
	}); err != nil {
		return sidecars, err
	}
	s.say("Both providers bid; the cheaper one, the cheater, won lease %d at block %d.", first.Id, first.StartHeight)

	s.section("3. Checkpoints, and a verifier re-executing each one")
	s.say("The verifier re-trains each checkpoint's steps from the state the chain agrees it started")
	s.detail("from (the initial weights, or the previous checkpoint's state downloaded from the provider")
	s.detail("and checked against its Merkle root) and compares the result with the commitment.")
	seen := map[uint64]bool{}
	reported := map[string]bool{}
	var challengeID uint64
	if err := poll(ctx, "the verifier's challenge of a checkpoint", 5*time.Minute, func() (bool, error) {
		cps, err := vq.Checkpoints(ctx, &verifytypes.QueryCheckpointsRequest{LeaseId: first.Id})
		if err != nil {
			return false, err
		}
		for _, cp := range cps.Checkpoints {
			if !seen[cp.Index] {
				seen[cp.Index] = true
				s.say("Block %d: the cheater commits checkpoint %d, steps %d..%d, h_%d = %x...", cp.SubmittedHeight, cp.Index, cp.StartStep, cp.EndStep, cp.EndStep, cp.FinalHash[:6])
			}
		}
		var vs struct {
			Verifications []struct {
				Index, Result, Detail string
				ChallengeID           string `json:"challenge_id"`
			} `json:"verifications"`
		}
		if err := verifier.REST(ctx, "/v1/verifications", &vs); err != nil {
			return false, err
		}
		for _, v := range vs.Verifications {
			if reported[v.Index] {
				continue
			}
			reported[v.Index] = true
			if v.ChallengeID != "" && v.ChallengeID != "0" {
				challengeID = uint64(mustInt(v.ChallengeID))
			}
			switch v.Result {
			case "matched":
				s.say("The verifier re-executed checkpoint %s: it matches.", v.Index)
			case "mismatched":
				s.say("The verifier re-executed checkpoint %s: MISMATCH. %s", v.Index, v.Detail)
			default:
				s.say("The verifier %s checkpoint %s: %s", v.Result, v.Index, v.Detail)
			}
		}
		return challengeID != 0, nil
	}); err != nil {
		return sidecars, err
	}

	s.section("4. The bisection game, played by the two sidecars")
	s.say("The verifier opened challenge %d, staking a bond. Each round the cheater's sidecar must reveal", challengeID)
	s.detail("its committed hash at the midpoint (with a Merkle proof against its trace root) and the")
	s.detail("verifier's sidecar answers with its own, halving the disputed range until one step is left.")
	var ch verifytypes.Challenge
	lastRound := ""
	if err := poll(ctx, fmt.Sprintf("the end of challenge %d", challengeID), 5*time.Minute, func() (bool, error) {
		res, err := vq.Challenge(ctx, &verifytypes.QueryChallengeRequest{ChallengeId: challengeID})
		if err != nil {
			return false, err
		}
		ch = res.Challenge
		round := fmt.Sprintf("%d/%d/%d/%s", ch.Lo, ch.Hi, ch.Mid, ch.Turn)
		if round != lastRound && ch.Outcome == verifytypes.CHALLENGE_OUTCOME_UNSPECIFIED {
			lastRound = round
			switch ch.Turn {
			case verifytypes.GAME_TURN_PROVIDER:
				s.say("round %d: steps %d..%d disputed; the cheater must reveal h_%d by block %d", ch.Rounds+1, ch.Lo, ch.Hi, ch.Mid, ch.Deadline)
			case verifytypes.GAME_TURN_CHALLENGER:
				s.say("         the cheater revealed h_%d; the verifier answers by block %d", ch.Mid, ch.Deadline)
			case verifytypes.GAME_TURN_ONE_STEP:
				s.say("one step left: %d -> %d. The verifier sends the agreed state at step %d and the training", ch.Lo, ch.Hi, ch.Lo)
				s.detail("data that step reads; the chain re-executes it with the same exact-transformer code")
				s.detail("(pkg/exact) the sidecars train with, and compares the state root.")
			}
		}
		return ch.Outcome != verifytypes.CHALLENGE_OUTCOME_UNSPECIFIED, nil
	}); err != nil {
		return sidecars, err
	}
	s.say("Decided: %s. %s", strings.TrimPrefix(ch.Outcome.String(), "CHALLENGE_OUTCOME_"), ch.OutcomeReason)

	s.section("5. The consequences, all on chain")
	prov, err := pq.Provider(ctx, &stakingexttypes.QueryProviderRequest{Operator: cheater.Operator})
	if err != nil {
		return sidecars, err
	}
	s.say("The cheater is %s: bond %s -> %s, and it can never bid again.", strings.TrimPrefix(prov.Provider.Status.String(), "PROVIDER_STATUS_"),
		depin(cheaterBond), depin(prov.Provider.Bond.String()))
	s.say("The verifier got its bond back and a share of the slash: balance %s -> %s.",
		depin(fmt.Sprintf("%d%s", verifierBefore, denom)), depin(fmt.Sprintf("%d%s", balance(verifier.Operator), denom)))
	lr, err := mq.Lease(ctx, &markettypes.QueryLeaseRequest{LeaseId: first.Id})
	if err != nil {
		return sidecars, err
	}
	s.say("Lease %d closed (%s); the payment no final checkpoint covered went back to the owner's escrow.",
		first.Id, strings.TrimPrefix(lr.Lease.CloseReason.String(), "LEASE_CLOSE_REASON_"))

	s.section("6. The job resumes on the honest provider")
	var second markettypes.Lease
	if err := poll(ctx, "a second lease on the reopened job", 2*time.Minute, func() (bool, error) {
		ls, err := mq.Leases(ctx, &markettypes.QueryLeasesRequest{JobId: jobID})
		if err != nil || len(ls.Leases) < 2 {
			return false, err
		}
		second = ls.Leases[1]
		return true, nil
	}); err != nil {
		return sidecars, err
	}
	s.say("The job reopened and the honest provider won lease %d, resuming at step %d: the last", second.Id, second.ResumeStep)
	s.detail("checkpoint that became final. Its sidecar downloaded that state from the cheater's server")
	s.detail("and checked it against the roots on chain before training on.")
	if err := poll(ctx, fmt.Sprintf("lease %d finishing and being paid", second.Id), 5*time.Minute, func() (bool, error) {
		lr, err := mq.Lease(ctx, &markettypes.QueryLeaseRequest{LeaseId: second.Id})
		if err != nil {
			return false, err
		}
		second = lr.Lease
		return second.State != markettypes.LEASE_STATE_ACTIVE && second.Pending.IsZero() && second.Withdrawable.IsZero() && second.Withdrawn.IsPositive(), nil
	}); err != nil {
		return sidecars, err
	}
	job, err := mq.Job(ctx, &markettypes.QueryJobRequest{JobId: jobID})
	if err != nil {
		return sidecars, err
	}
	s.say("Job %d is %s; the honest provider was paid %s, covered by final checkpoints only.",
		jobID, strings.TrimPrefix(job.Job.State.String(), "JOB_STATE_"), depin(second.Withdrawn.String()))
	s.say("Every move above was made by a sidecar; see each one's provider.log, and")
	s.detail("GET /v1/disputes and /v1/verifications on the verifier's status API (http://%s).", verifier.API)
	// -keep leaves the honest provider first, for exploring.
	return []*sidecar.Provider{honest, cheater, verifier}, nil
}

func bondOf(ctx context.Context, pq stakingexttypes.QueryClient, operator string) string {
	res, err := pq.Provider(ctx, &stakingexttypes.QueryProviderRequest{Operator: operator})
	if err != nil {
		return "0" + denom
	}
	return res.Provider.Bond.String()
}

// poll calls done every 250 ms until it reports true, fails, or ctx ends;
// past within it fails saying what did not happen.
func poll(ctx context.Context, what string, within time.Duration, done func() (bool, error)) error {
	l := limit(what, within)
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		if err := l.check(); err != nil {
			return err
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
}

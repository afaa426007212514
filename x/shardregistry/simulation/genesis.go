// Package simulation is x/shardregistry's part of the app simulation: randomized params
// and genesis datasets, operations for every message, governance proposals changing the
// params, and the deterministic bytes of every simulated dataset, so that claims, storage
// proofs and x/verify's referee can all be answered from chain state alone.
package simulation

import (
	"fmt"
	"math/rand"

	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/cosmos/cosmos-sdk/types/module"
	simtypes "github.com/cosmos/cosmos-sdk/types/simulation"

	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/x/internal/simutil"
	"github.com/depinchain/depinchain/x/shardregistry/keeper"
	"github.com/depinchain/depinchain/x/shardregistry/simulation/simdata"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// MaxPeriodBlocks bounds the simulated period_blocks. x/market's simulated
// block_hash_retention is larger, so a period's seed hash is always still stored.
const MaxPeriodBlocks = 20

// RandomParams draws valid params whose replica collateral is in denom. Periods are a
// few blocks, so that a short run sees proofs, misses and terminations; chunks and shards
// are small, so that proofs stay cheap.
func RandomParams(r *rand.Rand, denom string) types.Params {
	period := uint64(4 + r.Intn(MaxPeriodBlocks-3))
	miss := math.LegacyNewDecWithPrec(r.Int63n(21), 2) // 0 to 20%
	minChunk := uint32(64 << r.Intn(4))                // 64 to 512
	return types.Params{
		PeriodBlocks:                    period,
		ProofWindowBlocks:               uint64(1 + r.Int63n(int64(period/2))),
		ChallengesPerPeriod:             uint32(1 + r.Intn(8)),
		MaxDeadlinesPerBlock:            uint32(1 + r.Intn(50)),
		MissSlashFraction:               miss,
		DeclaredFaultSlashFraction:      miss.Mul(math.LegacyNewDecWithPrec(r.Int63n(101), 2)),
		MaxConsecutiveMisses:            uint32(1 + r.Intn(4)),
		MinReplicaCollateral:            sdk.NewInt64Coin(denom, r.Int63n(100_000)),
		CollateralPerMib:                math.NewInt(r.Int63n(1_000_000)),
		GasPerHash:                      uint64(1 + r.Intn(100)),
		GasPerByte:                      uint64(1 + r.Intn(4)),
		MinChunkSize:                    minChunk,
		MaxChunkSize:                    minChunk << r.Intn(4),
		MaxShardsPerDataset:             uint32(1 + r.Intn(8)),
		MaxPiecesPerShard:               uint32(2 + r.Intn(8)),
		MaxReplicas:                     uint32(1 + r.Intn(4)),
		MaxShardSize:                    uint64(1024 + r.Intn(8192)),
		CustodyMaxRetentionSeconds:      uint64(3600 + r.Intn(90*24*3600)),
		CustodyMaxStateSize:             uint64(1<<20 + r.Intn(1<<30)),
		CustodyStorageFeePerPiecePeriod: uint64(r.Intn(3)),
	}
}

// RandomEncoding draws an encoding within the params' limits.
func RandomEncoding(r *rand.Rand, p types.Params) types.Encoding {
	if r.Intn(2) == 0 {
		k := uint32(1 + r.Intn(int(min(4, p.MaxPiecesPerShard-1))))
		m := uint32(1 + r.Intn(int(min(2, p.MaxPiecesPerShard-k))))
		return types.Encoding{Kind: types.ENCODING_KIND_REED_SOLOMON, DataPieces: k, ParityPieces: m}
	}
	return types.Encoding{Kind: types.ENCODING_KIND_REPLICAS, Replicas: uint32(1 + r.Intn(int(min(3, p.MaxReplicas))))}
}

// NewDataset draws a valid registration of a simulated dataset: an encoding, a chunk
// size and one to three shards within the params' limits, whose pieces are the encoded
// simdata.ShardBytes and whose roots and manifest root are computed from them.
func NewDataset(r *rand.Rand, p types.Params, owner, id string) (*types.MsgRegisterDataset, error) {
	enc := RandomEncoding(r, p)
	chunkSize := p.MinChunkSize + uint32(r.Intn(int(min(p.MaxChunkSize, p.MinChunkSize+1024)-p.MinChunkSize)+1))
	msg := &types.MsgRegisterDataset{Owner: owner, DatasetId: id, Name: "simulated " + id, Encoding: enc, ChunkSize: chunkSize}
	shards := 1 + r.Intn(int(min(3, p.MaxShardsPerDataset)))
	var sample uint64
	for i := 0; i < shards; i++ {
		size := uint64(256 + r.Intn(int(min(p.MaxShardSize, 4096))))
		size = min(size, p.MaxShardSize)
		pieces, err := simdata.Pieces(enc, id, uint32(i), size)
		if err != nil {
			return nil, err
		}
		samples := uint64(1 + r.Intn(10))
		s := types.Shard{Index: uint32(i), SampleStart: sample, SampleEnd: sample + samples, SizeBytes: size}
		sample += samples
		for j, pc := range pieces {
			root := merkleRoot(pc, chunkSize)
			s.Pieces = append(s.Pieces, types.Piece{Index: uint32(j), Root: root, SizeBytes: uint64(len(pc))})
		}
		msg.Shards = append(msg.Shards, s)
		msg.TotalSize += size
	}
	root := types.ManifestRoot(enc, chunkSize, msg.TotalSize, msg.Shards)
	msg.ManifestRoot = root[:]
	return msg, nil
}

// RandomDatasetID draws an id of the form sim-xxxxxxxx.
func RandomDatasetID(r *rand.Rand) string {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := []byte("sim-")
	for i := 0; i < 8; i++ {
		b = append(b, letters[r.Intn(len(letters))])
	}
	return string(b)
}

// RandomizedGenState writes x/shardregistry's genesis: random params and up to three
// registered datasets (without replicas: those need collateral locks in x/stakingext).
func RandomizedGenState(simState *module.SimulationState) {
	r := simState.Rand
	gs := types.GenesisState{Params: RandomParams(r, simState.BondDenom), NextReplicaId: 1}
	for i, n := 0, r.Intn(4); i < n && len(simState.Accounts) > 0; i++ {
		owner := simState.Accounts[r.Intn(len(simState.Accounts))].Address.String()
		msg, err := NewDataset(r, gs.Params, owner, fmt.Sprintf("genesis-%d", i))
		if err != nil {
			panic(err)
		}
		stats, err := types.ValidateManifest(gs.Params, msg.DatasetId, msg.Encoding, msg.ChunkSize, msg.TotalSize, msg.Shards, msg.ManifestRoot)
		if err != nil {
			panic(err)
		}
		gs.Datasets = append(gs.Datasets, types.Dataset{
			Id: msg.DatasetId, Owner: owner, Name: msg.Name, ManifestRoot: msg.ManifestRoot, Encoding: msg.Encoding,
			ChunkSize: msg.ChunkSize, TotalSize: msg.TotalSize, ShardCount: uint32(len(msg.Shards)), SampleCount: stats.SampleCount,
		})
		for _, s := range msg.Shards {
			s.DatasetId = msg.DatasetId
			gs.Shards = append(gs.Shards, s)
		}
	}
	simState.GenState[types.ModuleName] = simState.Cdc.MustMarshalJSON(&gs)
}

func merkleRoot(data []byte, chunkSize uint32) []byte {
	root := merkle.RootOfBytes(data, int(chunkSize))
	return root[:]
}

// ProposalMsgs are the governance proposals x/shardregistry contributes: new random
// params, collateral in the current denomination.
func ProposalMsgs(k keeper.Keeper) []simtypes.WeightedProposalMsg {
	return simutil.ParamsProposal(types.ModuleName, func(r *rand.Rand, ctx sdk.Context, authority string) sdk.Msg {
		p, err := k.Params.Get(ctx)
		return &types.MsgUpdateParams{Authority: authority, Params: RandomParams(r, simutil.DenomOr(p.MinReplicaCollateral.Denom, err))}
	})
}

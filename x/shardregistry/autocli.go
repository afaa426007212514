package shardregistry

import (
	autocliv1 "cosmossdk.io/api/cosmos/autocli/v1"

	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// AutoCLIOptions generates the query and tx commands from the services. The commands
// that read files (register-dataset, claim-replica, submit-proof) are hand-written in
// client/cli; EnhanceCustomCommand merges them in.
func (AppModule) AutoCLIOptions() *autocliv1.ModuleOptions {
	return &autocliv1.ModuleOptions{
		Query: &autocliv1.ServiceCommandDescriptor{
			Service: types.Query_serviceDesc.ServiceName,
			RpcCommandOptions: []*autocliv1.RpcCommandOptions{
				{RpcMethod: "Params", Use: "params", Short: "Show the shard registry's parameters"},
				{
					RpcMethod: "Dataset", Use: "dataset [dataset-id]", Short: "Show a dataset with its open slots and under-replicated shards",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "dataset_id"}},
				},
				{RpcMethod: "Datasets", Use: "datasets", Short: "List datasets, optionally by --owner"},
				{
					RpcMethod: "Shard", Use: "shard [dataset-id] [index]", Short: "Show a shard: pieces with their CIDs, live counts and replicas",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "dataset_id"}, {ProtoField: "index"}},
				},
				{
					RpcMethod: "Shards", Use: "shards [dataset-id]", Short: "List a dataset's shards with their pieces' CIDs and live counts",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "dataset_id"}},
				},
				{
					RpcMethod: "Replica", Use: "replica [replica-id]", Short: "Show a replica",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "replica_id"}},
				},
				{RpcMethod: "Replicas", Use: "replicas", Short: "List replicas by --holder or --dataset-id (optionally --active-only)"},
				{RpcMethod: "RepairSlots", Use: "repair-slots", Short: "List pieces that need holders, optionally of one --dataset-id"},
				{RpcMethod: "UnderReplicatedShards", Use: "under-replicated", Short: "List shards below their target live count, optionally of one --dataset-id"},
				{
					RpcMethod: "ChallengeSchedule", Use: "challenge [replica-id]", Short: "Show a replica's due period, deadline and challenged chunks",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "replica_id"}},
				},
				{
					RpcMethod: "ClaimChallenge", Use: "claim-challenge [dataset-id] [shard] [piece] [holder]",
					Short: "Show the challenge a claim of a piece by holder must answer in the current period",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{
						{ProtoField: "dataset_id"}, {ProtoField: "shard"}, {ProtoField: "piece"}, {ProtoField: "holder"},
					},
				},
				{
					RpcMethod: "Assignment", Use: "assignment [job-id] [epoch]", Short: "Show which shards each worker of a job trains on in an epoch",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "job_id"}, {ProtoField: "epoch"}},
				},
			},
		},
		Tx: &autocliv1.ServiceCommandDescriptor{
			Service:              types.Msg_serviceDesc.ServiceName,
			EnhanceCustomCommand: true,
			RpcCommandOptions: []*autocliv1.RpcCommandOptions{
				{RpcMethod: "RegisterDataset", Skip: true},    // hand-written: reads manifest.json
				{RpcMethod: "ClaimReplica", Skip: true},       // hand-written: proves from a piece file
				{RpcMethod: "SubmitStorageProof", Skip: true}, // hand-written: proves from a piece file
				{
					RpcMethod: "ReleaseReplica", Use: "release-replica [replica-id]",
					Short:          "Give up a replica in good standing and unlock its collateral",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "replica_id"}},
				},
				{
					RpcMethod: "DeclareFault", Use: "declare-fault [replica-id]",
					Short:          "Declare a replica's piece lost: a smaller slash than a missed deadline, and the replica ends",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "replica_id"}},
				},
				{RpcMethod: "UpdateParams", Skip: true}, // governance only: submit through a gov proposal
			},
		},
	}
}

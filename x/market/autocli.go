package market

import (
	autocliv1 "cosmossdk.io/api/cosmos/autocli/v1"

	"github.com/depinchain/depinchain/x/market/types"
)

// AutoCLIOptions generates the query and tx commands from the services. Only submit-job
// is hand-written (it reads a YAML spec file); EnhanceCustomCommand merges it in.
func (AppModule) AutoCLIOptions() *autocliv1.ModuleOptions {
	return &autocliv1.ModuleOptions{
		Query: &autocliv1.ServiceCommandDescriptor{
			Service: types.Query_serviceDesc.ServiceName,
			RpcCommandOptions: []*autocliv1.RpcCommandOptions{
				{RpcMethod: "Params", Use: "params", Short: "Show the market's parameters"},
				{
					RpcMethod: "Job", Use: "job [job-id]", Short: "Show a job, with payment settled up to the latest block",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "job_id"}},
				},
				{RpcMethod: "Jobs", Use: "jobs", Short: "List jobs, optionally by --owner and --state (open, leased, completed, cancelled, expired, failed)"},
				{
					RpcMethod: "Bids", Use: "bids [job-id]", Short: "List the bids on a job",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "job_id"}},
				},
				{
					RpcMethod: "Lease", Use: "lease [lease-id]", Short: "Show a lease, with payment settled up to the latest block",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "lease_id"}},
				},
				{RpcMethod: "Leases", Use: "leases", Short: "List leases, optionally by --provider, --job-id and --active-only"},
				{
					RpcMethod: "Escrow", Use: "escrow [job-id]", Short: "Account for a job's deposit: unspent, pending, withdrawable, withdrawn",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "job_id"}},
				},
				{
					RpcMethod: "Round", Use: "round [job-id] [round]", Short: "Show a round of a sync job: its state, global roots, entered workers and deadlines",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "job_id"}, {ProtoField: "round"}},
				},
				{
					RpcMethod: "Rounds", Use: "rounds [job-id]", Short: "List the rounds of a sync job, oldest first",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "job_id"}},
				},
				{
					RpcMethod: "RoundCommits", Use: "round-commits [job-id] [round]", Short: "List the workers' commits of a round of a sync job",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "job_id"}, {ProtoField: "round"}},
				},
			},
		},
		Tx: &autocliv1.ServiceCommandDescriptor{
			Service:              types.Msg_serviceDesc.ServiceName,
			EnhanceCustomCommand: true,
			RpcCommandOptions: []*autocliv1.RpcCommandOptions{
				{RpcMethod: "SubmitJob", Skip: true},
				{
					RpcMethod: "PlaceBid", Use: "place-bid [job-id] [price-per-gpu-hour]", Alias: []string{"bid"},
					Short:          "Bid on an open job as a provider (price per GPU-hour, e.g. 1500000udepin; --steps-per-hour N, required, commits the throughput the auction ranks by price per step and the lease is held to; --runtime container|process|reference says what will run it, recorded on the lease)",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "job_id"}, {ProtoField: "price_per_gpu_hour"}},
				},
				{
					RpcMethod: "WithdrawBid", Use: "withdraw-bid [job-id]", Short: "Withdraw your bid on a job",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "job_id"}},
				},
				{
					RpcMethod: "CancelJob", Use: "cancel-job [job-id]", Short: "Cancel your job; unspent escrow is refunded at once",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "job_id"}},
				},
				{
					RpcMethod: "TopUpDeposit", Use: "top-up-deposit [job-id] [amount]", Short: "Add to a job's escrow",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "job_id"}, {ProtoField: "amount"}},
				},
				{
					RpcMethod: "WithdrawEarnings", Use: "withdraw-earnings",
					Short: "Withdraw earnings released by final checkpoints (all leases, or --lease-ids)",
				},
				{
					RpcMethod: "CommitRound", Use: "commit-round [lease-id] [round]",
					Short:          "Commit a sync job worker's round: --start-root, --end-root, --pseudo-gradient-root (base64), --pseudo-gradient-size and --piece-roots (the sidecar sends it)",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "lease_id"}, {ProtoField: "round"}},
				},
				{
					RpcMethod: "CommitGlobal", Use: "commit-global [job-id] [round]",
					Short:          "Commit the aggregation of a sync job's round: --entered, --global-root (base64), --global-size and --piece-roots (the sidecar sends it)",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "job_id"}, {ProtoField: "round"}},
				},
				{RpcMethod: "UpdateParams", Skip: true}, // governance only: submit through a gov proposal
			},
		},
	}
}

package verify

import (
	autocliv1 "cosmossdk.io/api/cosmos/autocli/v1"

	"github.com/depinchain/depinchain/x/verify/types"
)

// AutoCLIOptions generates the queries. The transactions carry Merkle proofs, states and
// data chunks computed from local files, so they are hand-written (client/cli) and merged in.
func (AppModule) AutoCLIOptions() *autocliv1.ModuleOptions {
	return &autocliv1.ModuleOptions{
		Query: &autocliv1.ServiceCommandDescriptor{
			Service: types.Query_serviceDesc.ServiceName,
			RpcCommandOptions: []*autocliv1.RpcCommandOptions{
				{RpcMethod: "Params", Use: "params", Short: "Show the verification parameters"},
				{
					RpcMethod: "Checkpoint", Use: "checkpoint [lease-id] [index]", Short: "Show one checkpoint of a lease",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "lease_id"}, {ProtoField: "index"}},
				},
				{
					RpcMethod: "Checkpoints", Use: "checkpoints [lease-id]", Short: "List a lease's checkpoints in order",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "lease_id"}},
				},
				{
					RpcMethod: "Challenge", Use: "challenge [challenge-id]", Short: "Show a dispute game: whose turn, range, deadline",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "challenge_id"}},
				},
				{RpcMethod: "Challenges", Use: "challenges", Short: "List challenges (--lease-id with --checkpoint-index or --all-checkpoints, --open-only)"},
				{
					RpcMethod: "DataRoot", Use: "data-root [job-id]", Short: "Show the Merkle root of a job's training data",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "job_id"}},
				},
				{
					RpcMethod: "Audits", Use: "audits",
					Short: "List audit assignments: --auditor addr, or --lease-id with --checkpoint-index (--open-only)",
				},
				{
					RpcMethod: "FileQuery", Use: "file-query [query-id]",
					Short:          "Show an open file query: range, node, turn, deadline and the sibling path revealed so far",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "query_id"}},
				},
			},
		},
		Tx: &autocliv1.ServiceCommandDescriptor{
			Service:              types.Msg_serviceDesc.ServiceName,
			EnhanceCustomCommand: true,
			RpcCommandOptions: []*autocliv1.RpcCommandOptions{
				{RpcMethod: "SubmitCheckpoint", Skip: true},
				{RpcMethod: "Challenge", Skip: true},
				{RpcMethod: "RevealHash", Skip: true},
				{RpcMethod: "Respond", Skip: true},
				{RpcMethod: "Step", Skip: true},
				{RpcMethod: "Attest", Skip: true}, // reads a trace file (client/cli)
				// Phases 2–3: records, operator and tile in client/cli re-execute the step.
				{RpcMethod: "CommitRecords", Skip: true},
				{RpcMethod: "RevealNode", Skip: true},
				{RpcMethod: "OpenRecord", Skip: true},
				{RpcMethod: "RevealChunk", Skip: true},
				{RpcMethod: "ProveTile", Skip: true},
				{RpcMethod: "ProveParityFault", Skip: true}, // reads the state and the piece (client/cli)
				{RpcMethod: "ProveRoundFault", Skip: true},  // built from the round's files (pkg/diloco openings)
				{
					RpcMethod: "OpenFileQuery", Use: "open-file-query [job-id] [round] [worker] [file]",
					Short: "Make a worker reveal a chunk of its round file (ROUND_FILE_START, or ROUND_FILE_ERROR_OUT with --header " +
						"its pseudo-gradient's chunk 0 opening as JSON), escrowing file_query_deposit",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "job_id"}, {ProtoField: "round"}, {ProtoField: "worker"}, {ProtoField: "file"}},
				},
				{
					RpcMethod: "AnswerFileQuery", Use: "answer-file-query [query-id]",
					Short:          "As the worker's provider, answer a file query: --left and --right (the node's children), or --chunk at a leaf",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "query_id"}},
				},
				{
					RpcMethod: "DescendFileQuery", Use: "descend-file-query [query-id]",
					Short:          "As the challenger, descend a file query into the left child, or the right one with --right",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "query_id"}},
				},
				{
					RpcMethod: "ClaimTimeout", Use: "claim-timeout [challenge-id]",
					Short:          "End a game whose party to move missed its deadline (anyone may), without waiting for the end blocker",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "challenge_id"}},
				},
				{
					RpcMethod: "ReportUnavailable", Use: "report-unavailable [lease-id] [checkpoint-index]",
					Short:          "As a drawn auditor, report that the provider does not serve the state the checkpoint starts from",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "lease_id"}, {ProtoField: "checkpoint_index"}},
				},
				{RpcMethod: "UpdateParams", Skip: true}, // governance only
			},
		},
	}
}

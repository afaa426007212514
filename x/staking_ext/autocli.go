package stakingext

import (
	autocliv1 "cosmossdk.io/api/cosmos/autocli/v1"

	"github.com/depinchain/depinchain/x/staking_ext/types"
)

// gpusFlagUsage explains the one non-obvious flag: AutoCLI reads each --gpus
// value as the JSON of one GPUInventory (or a path to a .json file holding
// one) and appends it, so a host with two GPU classes passes --gpus twice.
const gpusFlagUsage = `one GPU class as JSON, e.g. '{"model":"H100-SXM5-80GB","vram_mib":81920,"count":8}'; repeat the flag for each class`

// AutoCLIOptions describes the CLI that AutoCLI generates for the module:
// `depinchaind query stakingext ...` and `depinchaind tx stakingext ...`.
func (AppModule) AutoCLIOptions() *autocliv1.ModuleOptions {
	return &autocliv1.ModuleOptions{
		Query: &autocliv1.ServiceCommandDescriptor{
			Service: types.Query_serviceDesc.ServiceName,
			RpcCommandOptions: []*autocliv1.RpcCommandOptions{
				{
					RpcMethod: "Params",
					Use:       "params",
					Short:     "Show the module's parameters",
				},
				{
					RpcMethod:      "Provider",
					Use:            "provider [operator]",
					Short:          "Show one provider: GPUs, bond, locked collateral, status, reputation",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "operator"}},
				},
				{
					RpcMethod: "Providers",
					Use:       "providers",
					Short:     "List providers, optionally only those with one status",
					Example:   "depinchaind query stakingext providers --status jailed",
					FlagOptions: map[string]*autocliv1.FlagOptions{
						"status": {Usage: "only list providers with this status (active, jailed or tombstoned)"},
					},
				},
				{
					RpcMethod:      "Unbondings",
					Use:            "unbondings [operator]",
					Short:          "List an operator's queued unbondings and when they complete",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "operator"}},
				},
				{
					RpcMethod:      "Locks",
					Use:            "locks [operator]",
					Short:          "List the collateral locks held against an operator's bond",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "operator"}},
				},
				{
					RpcMethod:      "Verifier",
					Use:            "verifier [operator]",
					Short:          "Show one verifier (auditor): bond, status, audit record, position in the audit set",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "operator"}},
				},
				{
					RpcMethod: "Verifiers",
					Use:       "verifiers",
					Short:     "List verifiers, or with --active-only the audit set in position order",
				},
			},
		},
		Tx: &autocliv1.ServiceCommandDescriptor{
			Service: types.Msg_serviceDesc.ServiceName,
			RpcCommandOptions: []*autocliv1.RpcCommandOptions{
				{
					RpcMethod: "RegisterProvider",
					Use:       "register-provider [moniker] [endpoint] [region] [bond] --gpus [json] ...",
					Short:     "Register as a GPU provider and bond stake (at least min_bond_per_gpu per GPU)",
					Example: `depinchaind tx stakingext register-provider gpu-farm-1 https://gpu1.example.com:8443 eu-west 16000000udepin \
  --gpus '{"model":"H100-SXM5-80GB","vram_mib":81920,"count":8}' \
  --gpus '{"model":"A100-SXM4-40GB","vram_mib":40960,"count":8}' --from operator`,
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{
						{ProtoField: "moniker"}, {ProtoField: "endpoint"}, {ProtoField: "region"}, {ProtoField: "bond"},
					},
					FlagOptions: map[string]*autocliv1.FlagOptions{"gpus": {Usage: gpusFlagUsage}},
				},
				{
					RpcMethod: "UpdateProvider",
					Use:       "update-provider [moniker] [endpoint] [region] --gpus [json] ...",
					Short:     "Replace your provider's moniker, endpoint, region and complete GPU inventory",
					Example: `depinchaind tx stakingext update-provider gpu-farm-1 https://gpu1.example.com:8443 eu-west \
  --gpus '{"model":"H100-SXM5-80GB","vram_mib":81920,"count":16}' --from operator`,
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{
						{ProtoField: "moniker"}, {ProtoField: "endpoint"}, {ProtoField: "region"},
					},
					FlagOptions: map[string]*autocliv1.FlagOptions{"gpus": {Usage: gpusFlagUsage}},
				},
				{
					RpcMethod:      "Bond",
					Use:            "bond [amount]",
					Short:          "Add stake to your provider bond",
					Example:        "depinchaind tx stakingext bond 5000000udepin --from operator",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "amount"}},
				},
				{
					RpcMethod:      "Unbond",
					Use:            "unbond [amount]",
					Short:          "Start returning free (unlocked) bond; it arrives after the unbonding period",
					Example:        "depinchaind tx stakingext unbond 5000000udepin --from operator",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "amount"}},
				},
				{
					RpcMethod: "Unjail",
					Use:       "unjail",
					Short:     "Re-activate your jailed provider once its jail time is over",
				},
				{
					RpcMethod:      "RegisterVerifier",
					Use:            "register-verifier [bond]",
					Short:          "Register as a verifier (auditor) and bond at least min_verifier_bond; x/verify then draws you for audits",
					Example:        "depinchaind tx stakingext register-verifier 100000000udepin --from auditor",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "bond"}},
				},
				{
					RpcMethod:      "BondVerifier",
					Use:            "bond-verifier [amount]",
					Short:          "Add to your verifier bond",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "amount"}},
				},
				{
					RpcMethod:      "UnbondVerifier",
					Use:            "unbond-verifier [amount]",
					Short:          "Start returning verifier bond; below min_verifier_bond you leave the audit set",
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "amount"}},
				},
				{
					RpcMethod: "ActivateVerifier",
					Use:       "activate-verifier",
					Short:     "Put your inactive verifier back into the audit set (after a missed assignment)",
				},
				{
					RpcMethod:      "UpdateParams",
					Use:            "update-params-proposal [params]",
					Short:          "Submit a governance proposal replacing all stakingext params",
					Example:        `depinchaind tx stakingext update-params-proposal '{"bond_denom":"udepin","min_bond_per_gpu":"1000000","unbonding_period":"1814400s","max_gpu_classes":16,"max_unbondings_per_block":100,"max_unbonding_entries":7,"unbonding_blocks":"100800","min_verifier_bond":"100000000"}' --from proposer --deposit 10000000udepin`,
					PositionalArgs: []*autocliv1.PositionalArgDescriptor{{ProtoField: "params"}},
					GovProposal:    true,
				},
			},
		},
	}
}

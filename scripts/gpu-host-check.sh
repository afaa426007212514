#!/usr/bin/env bash
# The GPU-host part of `make gpu-check`: what the sidecar would register on this
# host and whether the container runtime's GPU request works here. It needs no
# Go toolchain: it runs binaries built where Go is (`make gpu-check-build` puts
# them in build/gpu-check/; copy that folder to the GPU host).
#
#   scripts/gpu-host-check.sh [DIR]      DIR holds depinprovider, runtime.test and trainer
#
# Every part says PASS, FAIL or SKIPPED (with the reason); nothing is simulated.
# Exit status: 1 if any part FAILED, else 0.
set -uo pipefail

dir=${1:-build/gpu-check}
failed=0
report() { printf '%-34s %s\n' "$1" "$2"; }

echo "== GPU host check ($(date -u +%FT%TZ), $(uname -n)) =="

# 1. The NVML inventory as the sidecar registers it: catalogue names and
#    nominal memory classes (depinprovider gpus), every GPU with its NVML
#    reading and PCI id (gpus --all), unknown or unhealthy GPUs on stderr.
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
uuids=""
if [[ ! -x $dir/depinprovider ]]; then
	report "inventory" "SKIPPED: $dir/depinprovider missing (make gpu-check-build)"
else
	"$dir/depinprovider" init --home "$home" --gpu-source nvml >/dev/null
	if all=$("$dir/depinprovider" gpus --all --home "$home" 2>"$home/stderr"); then
		if grep -q "no NVIDIA driver" "$home/stderr"; then
			report "inventory" "SKIPPED: $(head -1 "$home/stderr")"
		else
			echo "-- every GPU (NVML reading, PCI id, catalogue model, health):"
			echo "$all"
			echo "-- registered as (depinprovider gpus; the --gpus values of register-provider):"
			"$dir/depinprovider" gpus --home "$home" 2>&1
			if [[ -z $all ]]; then
				report "inventory" "FAIL: the driver is there but NVML lists no GPU"
				failed=1
			elif grep -q '"offered":false' <<<"$all"; then
				report "inventory" "FAIL: some GPUs are not offered (see above; an unknown model prints the catalogue entry to add)"
				failed=1
			else
				report "inventory" "PASS: $(grep -c . <<<"$all") GPU(s), all catalogued and healthy"
			fi
			uuids=$(grep -o '"uuid":"[^"]*"' <<<"$all" | head -1 | cut -d'"' -f4)
		fi
	else
		report "inventory" "FAIL: $(cat "$home/stderr")"
		failed=1
	fi
fi

# 2. The container runtime's GPU request for a leased UUID (Docker + the
#    NVIDIA container toolkit), with the PyTorch ulimits, through the real
#    runtime code (provider/runtime's TestContainerGPURequest).
if [[ -z $uuids ]]; then
	report "container GPU request" "SKIPPED: no GPU in the inventory"
elif ! command -v docker >/dev/null || ! docker info >/dev/null 2>&1; then
	report "container GPU request" "SKIPPED: no Docker Engine reachable"
elif ! docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q nvidia && ! command -v nvidia-container-cli >/dev/null; then
	report "container GPU request" "SKIPPED: Docker has no NVIDIA runtime (install the NVIDIA container toolkit)"
elif [[ ! -x $dir/runtime.test || ! -x $dir/trainer ]]; then
	report "container GPU request" "SKIPPED: $dir/runtime.test or $dir/trainer missing (make gpu-check-build)"
else
	if out=$(cd "$dir" && DEPIN_GPU_UUIDS=$uuids DEPIN_TEST_TRAINER=$PWD/trainer ./runtime.test -test.run '^TestContainerGPURequest$' -test.v 2>&1); then
		echo "$out" | grep -E "nvidia devices|CUDA_VISIBLE" | sed 's/^/   /'
		report "container GPU request" "PASS: $uuids visible in the container"
	else
		echo "$out" | tail -20
		report "container GPU request" "FAIL (output above)"
		failed=1
	fi
fi
exit $failed

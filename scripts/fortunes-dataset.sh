#!/usr/bin/env bash
# Builds Debian's `fortunes` (installed by scripts/deps.sh) into a training corpus and
# registers it with x/shardregistry as a dataset that dataset-backed jobs can name.
#
#   scripts/fortunes-dataset.sh --out DIR [--id fortunes-en] [--rs 2+1 | --replicas N]
#       [--shard-size 256KiB] [--chunk-size 1024] [--max-bytes N]
#       [--binary depinchaind] [--home DIR]
#       [--from KEY --keyring-backend test --node tcp://127.0.0.1:26657 --chain-id ID]
#
# Writes DIR/fortunes.txt (the plain-text fortune files of /usr/share/games/fortunes,
# not their .dat/.u8 indexes, concatenated in name order; --max-bytes keeps only the
# first N bytes, for quick tests) and DIR/built (`depinchaind dataset build`: pieces/ and
# manifest.json). With --from it also sends `tx shardregistry register-dataset` and waits
# for it to be in a block. The corpus and the pieces are build outputs: never commit them.
# The last line printed is the manifest's path.
set -euo pipefail

out="" id="fortunes-en" rs="2+1" replicas="" shard_size="256KiB" chunk_size="1024" max_bytes=""
binary="${DEPINCHAIND_BINARY:-depinchaind}" home="" from="" keyring="test" node="" chain_id=""
src="${FORTUNES_DIR:-/usr/share/games/fortunes}"
while [ $# -gt 0 ]; do
	case "$1" in
	--out) out="$2" ;;
	--id) id="$2" ;;
	--rs) rs="$2" ;;
	--replicas) replicas="$2" rs="" ;;
	--shard-size) shard_size="$2" ;;
	--chunk-size) chunk_size="$2" ;;
	--max-bytes) max_bytes="$2" ;;
	--binary) binary="$2" ;;
	--home) home="$2" ;;
	--from) from="$2" ;;
	--keyring-backend) keyring="$2" ;;
	--node) node="$2" ;;
	--chain-id) chain_id="$2" ;;
	-h | --help) sed -n '2,16p' "$0"; exit 0 ;;
	*) echo "fortunes-dataset: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
	shift 2
done
[ -n "$out" ] || { echo "fortunes-dataset: --out DIR is required" >&2; exit 2; }
if [ ! -d "$src" ]; then
	echo "fortunes-dataset: $src is missing: install Debian's fortunes (scripts/deps.sh, or apt-get install fortunes)" >&2
	exit 1
fi

mkdir -p "$out"
corpus="$out/fortunes.txt"
# Only regular files: the .u8 names are symlinks, the .dat files strfile indexes.
mapfile -t files < <(find "$src" -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | LC_ALL=C sort)
[ ${#files[@]} -gt 0 ] || { echo "fortunes-dataset: no fortune files in $src" >&2; exit 1; }
if [ -n "$max_bytes" ]; then
	# cat ends with SIGPIPE once head has enough: only head's status counts.
	{ cat "${files[@]}" || true; } | head -c "$max_bytes" >"$corpus.tmp"
else
	cat "${files[@]}" >"$corpus.tmp"
fi
mv "$corpus.tmp" "$corpus"
echo "fortunes-dataset: $corpus: $(wc -c <"$corpus") bytes from ${#files[@]} files of $src" >&2

home_args=()
[ -n "$home" ] && home_args=(--home "$home")
encoding=(--rs "$rs")
[ -n "$replicas" ] && encoding=(--replicas "$replicas")
rm -rf "$out/built"
"$binary" dataset build "$corpus" --out "$out/built" --shard-size "$shard_size" --chunk-size "$chunk_size" \
	"${encoding[@]}" --id "$id" --name "Debian fortunes" --show-shards 3 "${home_args[@]}" >&2
manifest="$out/built/manifest.json"

if [ -n "$from" ]; then
	tx=(--from "$from" --keyring-backend "$keyring" --yes --output json --gas auto --gas-adjustment 1.5 --broadcast-mode sync)
	[ -n "$node" ] && tx+=(--node "$node")
	[ -n "$chain_id" ] && tx+=(--chain-id "$chain_id")
	res=$("$binary" tx shardregistry register-dataset --manifest "$manifest" "${tx[@]}" "${home_args[@]}")
	hash=$(printf '%s' "$res" | sed -n 's/.*"txhash":"\([0-9A-F]*\)".*/\1/p')
	code=$(printf '%s' "$res" | sed -n 's/.*"code":\([0-9]*\).*/\1/p' | head -n1)
	if [ -z "$hash" ] || [ "${code:-0}" != 0 ]; then
		echo "fortunes-dataset: register-dataset was refused: $res" >&2
		exit 1
	fi
	q=(--output json)
	[ -n "$node" ] && q+=(--node "$node")
	for _ in $(seq 1 60); do
		if got=$("$binary" query tx "$hash" "${q[@]}" "${home_args[@]}" 2>/dev/null); then
			code=$(printf '%s' "$got" | sed -n 's/.*"code":\([0-9]*\).*/\1/p' | head -n1)
			if [ "${code:-0}" != 0 ]; then
				echo "fortunes-dataset: register-dataset failed in block: $got" >&2
				exit 1
			fi
			echo "fortunes-dataset: dataset $id registered (tx $hash)" >&2
			echo "$manifest"
			exit 0
		fi
		sleep 0.5
	done
	echo "fortunes-dataset: tx $hash was not included within 30 s" >&2
	exit 1
fi
echo "$manifest"

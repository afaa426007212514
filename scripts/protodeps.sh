#!/usr/bin/env bash
# Copies the third-party .proto files our protos import out of the Go module
# cache into third_party/proto (ignored by git), so buf needs no registry.
set -euo pipefail
cd "$(dirname "$0")/.."
go mod download github.com/cosmos/cosmos-sdk github.com/cosmos/gogoproto github.com/cosmos/cosmos-proto
go mod download github.com/grpc-ecosystem/grpc-gateway@v1.16.0 >/dev/null 2>&1 || true
modcache=$(go env GOMODCACHE)
sdk=$(go list -m -f '{{.Dir}}' github.com/cosmos/cosmos-sdk)
gogo=$(go list -m -f '{{.Dir}}' github.com/cosmos/gogoproto)
cosmosproto=$(go list -m -f '{{.Dir}}' github.com/cosmos/cosmos-proto)
gateway="$modcache/github.com/grpc-ecosystem/grpc-gateway@v1.16.0"

out=third_party/proto
rm -rf "$out"
mkdir -p "$out/gogoproto" "$out/cosmos_proto" "$out/google/api"
cp "$gogo/gogoproto/gogo.proto" "$out/gogoproto/"
cp "$cosmosproto/proto/cosmos_proto/cosmos.proto" "$out/cosmos_proto/"
cp "$gateway/third_party/googleapis/google/api/annotations.proto" "$gateway/third_party/googleapis/google/api/http.proto" "$out/google/api/"
cp -r "$sdk/proto/cosmos" "$sdk/proto/amino" "$sdk/proto/tendermint" "$out/"
chmod -R u+w "$out"

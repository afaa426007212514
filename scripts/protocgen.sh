#!/usr/bin/env bash
# Regenerates the gogoproto Go code, the grpc-gateway handlers and the
# OpenAPI document from proto/, with no network: third-party .proto files
# come from the Go module cache (see `proto-deps` in the Makefile).
#
# Two generations:
#   - the chain's modules (everything under proto/depinchain but provider/)
#     with gogoproto and grpc-gateway v1 (buf.gen.gogo.yaml), merged into
#     docs/static/openapi.json;
#   - the provider sidecar's status API (proto/depinchain/provider) with
#     plain google protobuf, protoc-gen-go-grpc and grpc-gateway v2
#     (buf.gen.provider.yaml) into provider/status/v1, and its own
#     docs/static/provider-openapi.json. It must not go through gogoproto,
#     and the chain's OpenAPI document does not describe it.
set -euo pipefail
cd "$(dirname "$0")/.."

export PATH="$(go env GOPATH)/bin:$PATH"
provider=proto/depinchain/provider

rm -rf .gen
buf generate --template buf.gen.gogo.yaml --path proto/depinchain --exclude-path "$provider"
cp -r .gen/github.com/depinchain/depinchain/* ./
buf generate --template buf.gen.swagger.yaml --path proto/depinchain --exclude-path "$provider"
go run ./scripts/mergeopenapi .gen/openapi docs/static/openapi.json
rm -rf .gen

buf generate --template buf.gen.provider.yaml --path "$provider"
rm -f provider/status/v1/*.pb.go provider/status/v1/*.pb.gw.go
cp -r .gen/github.com/depinchain/depinchain/* ./
buf generate --template buf.gen.swagger.yaml --path "$provider"
cp .gen/openapi/depinchain/provider/v1/status.swagger.json docs/static/provider-openapi.json
rm -rf .gen

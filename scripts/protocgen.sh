#!/usr/bin/env bash
# Regenerates the gogoproto Go code, the grpc-gateway handlers and the
# OpenAPI document from proto/, with no network: third-party .proto files
# come from the Go module cache (see `proto-deps` in the Makefile).
set -euo pipefail
cd "$(dirname "$0")/.."

export PATH="$(go env GOPATH)/bin:$PATH"
rm -rf .gen
buf generate --template buf.gen.gogo.yaml --path proto/depinchain
cp -r .gen/github.com/depinchain/depinchain/* ./
buf generate --template buf.gen.swagger.yaml --path proto/depinchain
go run ./scripts/mergeopenapi .gen/openapi docs/static/openapi.json
rm -rf .gen

#!/usr/bin/env bash
# Lints proto/ and generates its Go code (api/tblimit/v1) with buf and the Go
# plugins, each installed with go install at a pinned version into .ci/bin
# (as .ci/run installs staticcheck; nothing goes on PATH).
#
#   scripts/gen-proto.sh           lint, and write the generated code
#   scripts/gen-proto.sh --check   lint, and fail if the committed code is not
#                                  what the .proto files generate
set -euo pipefail
cd "$(dirname "$0")/.."

BUF_VERSION=v1.75.0
PROTOC_GEN_GO_GRPC_VERSION=v1.5.1
# protoc-gen-go at the version of the runtime in go.mod, so that the code
# it writes matches the library it is compiled with.
PROTOC_GEN_GO_VERSION=$(go list -m -f '{{.Version}}' google.golang.org/protobuf)

export GOBIN="$PWD/.ci/bin"
go install "github.com/bufbuild/buf/cmd/buf@${BUF_VERSION}"
go install "google.golang.org/protobuf/cmd/protoc-gen-go@${PROTOC_GEN_GO_VERSION}"
go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@${PROTOC_GEN_GO_GRPC_VERSION}"

.ci/bin/buf lint
case "${1:-}" in
"")
	.ci/bin/buf generate
	;;
--check)
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	.ci/bin/buf generate -o "$tmp"
	if ! diff -r "$tmp/api/tblimit" api/tblimit; then
		echo "api/tblimit is not what proto/ generates: run scripts/gen-proto.sh and commit" >&2
		exit 1
	fi
	;;
*)
	echo "usage: $0 [--check]" >&2
	exit 2
	;;
esac

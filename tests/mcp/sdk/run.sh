#!/usr/bin/env bash
# CTest driver of mcp_sdk_client: installs the official MCP TypeScript SDK
# from npm exactly as package-lock.json pins it (npm ci, in the build tree;
# npm's cache makes later runs offline), then runs client.mjs against
# `kopt mcp` and a `kopt daemon` with the fake evaluator.
#   run.sh KOPT SOURCE_DIR WORK_DIR
set -euo pipefail
kopt=$1 src=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "mcp_sdk_client: $tool is missing; scripts/setup installs it with the test packages (KOPT_TEST_PACKAGES=1)" >&2
    exit 1
  fi
done
mkdir -p "$work/client"
cp "$here/package.json" "$here/package-lock.json" "$here/client.mjs" "$work/client/"
cd "$work/client"
if [[ ! -d node_modules/@modelcontextprotocol/sdk ]] || ! cmp -s package-lock.json node_modules/.package-lock.json.kopt; then
  npm ci --no-audit --no-fund --prefer-offline --loglevel=error
  cp package-lock.json node_modules/.package-lock.json.kopt
fi
echo "node $(node --version), @modelcontextprotocol/sdk $(node -p 'require("./node_modules/@modelcontextprotocol/sdk/package.json").version')"
exec node client.mjs "$kopt" "$src" "$work/run"

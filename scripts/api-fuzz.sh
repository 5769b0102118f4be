#!/usr/bin/env bash
# The property-based API run: schemathesis generates requests from openapi.yaml against a fresh
# `sarvcrawl serve` and checks that no answer is a server error (besides the documented 503s)
# and that every answer has a documented status, content type and schema.
# Needs ./.venv from scripts/aws-emulator.sh and the built binary.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
data=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$root/target/debug/sarvcrawl" serve --addr "127.0.0.1:$port" --data-dir "$data" --workers 1 \
  >"$data/serve.log" 2>&1 &
serve=$!
trap 'kill $serve 2>/dev/null || true; rm -rf "$data"' EXIT
for _ in $(seq 100); do
  curl -fs "http://127.0.0.1:$port/api/health" >/dev/null 2>&1 && break
  sleep 0.1
done
cd "$root"
SCHEMATHESIS_HOOKS=scripts.schemathesis_hooks "$root/.venv/bin/schemathesis" run openapi.yaml \
  --url "http://127.0.0.1:$port" \
  --checks no_undocumented_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,response_headers_conformance \
  --max-examples 30 --request-timeout 10 --seed 1 --no-color

#!/usr/bin/env bash
# What one signed AWS call costs the process that makes it: the CPU of a DynamoDB GetItem, a
# DynamoDB Query and an S3 PutObject of a 73 KB document, made through the service's own SDK
# clients (`Clients::from_env`) against nginx on loopback answering every request at once with
# an empty success, so that only the client's work is counted. Once over connections kept open
# (as AWS keeps them) and once with a connection a call (as the emulator does). `wire-get`,
# `wire-query` and `wire-put` are the same three sent by the service's own client (`Wire`),
# which the stores use, instead of the SDK's.
#
#   bash bench/sdk_calls.sh          # CALLS=5000 a run, 1 and 16 calls at once
set -euo pipefail
cd "$(dirname "$0")/.."
CALLS=${CALLS:-5000}
work=$(mktemp -d)
cleanup() {
  kill "$(cat "$work"/nginx.pid 2>/dev/null)" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

source bench/site.sh
cargo build --release --locked -p sarvcrawl-aws --example call_cpu >&2
kept=$(free_port)
closed=$(free_port)
start_nginx "$work" "  client_max_body_size 0;
  keepalive_requests 1000000;
  server { listen 127.0.0.1:$kept; default_type application/x-amz-json-1.0; location / { return 200 '{}'; } }
  server { listen 127.0.0.1:$closed; keepalive_timeout 0; default_type application/x-amz-json-1.0; location / { return 200 '{}'; } }"
for _ in $(seq 50); do curl -fs -XPOST "127.0.0.1:$kept/" >/dev/null && break; sleep 0.1; done

export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1
export AWS_EC2_METADATA_DISABLED=true
for port in "$kept" "$closed"; do
  if [ "$port" = "$kept" ]; then echo "== connections kept open"; else echo "== a connection a call"; fi
  for op in get wire-get query wire-query put-object wire-put; do
    for at_once in 1 16; do
      AWS_ENDPOINT_URL="http://127.0.0.1:$port" ./target/release/examples/call_cpu "$op" "$CALLS" "$at_once"
    done
  done
done

#!/usr/bin/env bash
# Installs the AWS emulator (moto server), the template checkers (cfn-lint, SAM CLI), the
# API fuzzer (schemathesis), cargo-lambda and the reference webhook verifier (standardwebhooks)
# into ./.venv when missing.
# Source it to start the emulator (scripts/aws_emulator.py) on a free loopback port: it exports
# AWS_ENDPOINT_URL and dummy credentials; `start_aws_emulator` starts one more (its endpoint in
# AWS_EMULATOR_URL), and `stop_aws_emulator` stops them all.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
if [ ! -x "$venv/bin/moto_server" ] || [ ! -x "$venv/bin/cfn-lint" ] || [ ! -x "$venv/bin/sam" ] \
  || [ ! -x "$venv/bin/schemathesis" ] || [ ! -x "$venv/bin/cargo-lambda" ] \
  || ! "$venv/bin/python" -c 'import standardwebhooks' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    'moto[server]==5.*' 'cfn-lint==1.*' 'aws-sam-cli==1.*' 'schemathesis==4.*' 'cargo-lambda==1.*' \
    'standardwebhooks==1.*'
fi
AWS_EMULATOR_PIDS=()
# Starts one more emulator on a free loopback port and sets AWS_EMULATOR_URL to its endpoint.
start_aws_emulator() {
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$venv/bin/python" "$root/scripts/aws_emulator.py" 127.0.0.1 "$port" \
    >"${TMPDIR:-/tmp}/sarvcrawl-moto-$port.log" 2>&1 &
  AWS_EMULATOR_PIDS+=("$!")
  for _ in $(seq 100); do
    curl -fs "http://127.0.0.1:$port/moto-api/" >/dev/null 2>&1 && break
    sleep 0.1
  done
  AWS_EMULATOR_URL="http://127.0.0.1:$port"
}
stop_aws_emulator() { kill "${AWS_EMULATOR_PIDS[@]}" 2>/dev/null || true; }
start_aws_emulator
export AWS_ENDPOINT_URL="$AWS_EMULATOR_URL"
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1
export AWS_EC2_METADATA_DISABLED=true SAM_CLI_TELEMETRY=0

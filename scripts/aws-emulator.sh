#!/usr/bin/env bash
# Installs the tools of scripts/tools.sh into ./.venv when missing.
# Source it to start the emulator (scripts/aws_emulator.py) on a free loopback port: it exports
# AWS_ENDPOINT_URL and dummy credentials; `start_aws_emulator` starts one more (its endpoint in
# AWS_EMULATOR_URL), and `stop_aws_emulator` stops them all and removes their logs.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
bash "$root/scripts/tools.sh"
AWS_EMULATOR_PIDS=()
AWS_EMULATOR_LOGS=()
# Starts one more emulator on a free loopback port and sets AWS_EMULATOR_URL to its endpoint.
start_aws_emulator() {
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  local log="${TMPDIR:-/tmp}/sarvcrawl-moto-$port.log"
  "$venv/bin/python" "$root/scripts/aws_emulator.py" 127.0.0.1 "$port" >"$log" 2>&1 &
  AWS_EMULATOR_PIDS+=("$!")
  AWS_EMULATOR_LOGS+=("$log")
  for _ in $(seq 100); do
    curl -fs "http://127.0.0.1:$port/moto-api/" >/dev/null 2>&1 && break
    sleep 0.1
  done
  AWS_EMULATOR_URL="http://127.0.0.1:$port"
}
stop_aws_emulator() {
  kill "${AWS_EMULATOR_PIDS[@]}" 2>/dev/null || true
  rm -f "${AWS_EMULATOR_LOGS[@]}"
  AWS_EMULATOR_PIDS=()
  AWS_EMULATOR_LOGS=()
}
start_aws_emulator
export AWS_ENDPOINT_URL="$AWS_EMULATOR_URL"
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1
export AWS_EC2_METADATA_DISABLED=true SAM_CLI_TELEMETRY=0

#!/usr/bin/env bash
# Runs every check and test of SarvCrawl: formatting, lints, unit tests, the template linter,
# the black-box suite against a real `sarvcrawl serve`, once on the local backend and once on
# the AWS backend over a local emulator, with fixture sites on 127.0.0.1 and headless Chromium
# for rendered pages (installed when missing), and the property-based
# API run of schemathesis against openapi.yaml.
set -euo pipefail
cd "$(dirname "$0")/.."
# No incremental caches: a clean run never reuses them, and they double the build's disk use.
export CARGO_INCREMENTAL=0

command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)" >&2; exit 1; }
rustup component add rustfmt clippy >/dev/null 2>&1 || true

# Chromium and the Python tools are downloaded while the code compiles (mostly waiting on
# the network); their output is shown once the build is done.
setup_log=$(mktemp)
# (Removed on the way out too, should fmt or clippy stop the run before it is read.)
trap 'rm -f "$setup_log"' EXIT
(bash scripts/chromium.sh && bash scripts/tools.sh) >"$setup_log" 2>&1 &
setup=$!

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --all-features --locked -- -D warnings
# The black-box tests spawn the server binary, and the cargo-lambda smoke test three function
# binaries: build them with the tests, in one feature set, so every dependency is compiled once.
cargo build --workspace --all-features --locked --tests \
  --bin sarvcrawl --bin status --bin submit --bin worker
setup_done=0
wait "$setup" || setup_done=$?
cat "$setup_log"
rm -f "$setup_log"
[ "$setup_done" -eq 0 ] || { echo "installing Chromium or the tools in ./.venv failed" >&2; exit 1; }

# shellcheck source=scripts/aws-emulator.sh
source scripts/aws-emulator.sh
trap stop_aws_emulator EXIT
.venv/bin/cfn-lint template.yaml
.venv/bin/sam validate --lint --template template.yaml
.venv/bin/openapi-spec-validator openapi.yaml

cargo test --workspace --all-features --locked
echo "--- the black-box suite on the AWS backend"
# Two emulators, each new server's resources on the one with fewer servers running: an
# emulator is one Python process, busy on at most one core, and one alone set this pass's pace.
# Both are fresh: the first pass's emulator holds every resource its tests made, and an
# emulator slows down as it fills.
stop_aws_emulator
AWS_EMULATOR_PIDS=()
start_aws_emulator
export AWS_ENDPOINT_URL="$AWS_EMULATOR_URL"
start_aws_emulator
# (The browser's own tests, which use no backend, and the tests that use the emulator
# whatever the backend (the Lambda handlers, the stores, the fault run) ran in the first pass.)
# The same workspace and features as the first pass: `-p e2e` alone would resolve the
# dependencies' features for that package and compile most of them again.
SARVCRAWL_TEST_EMULATORS="$AWS_ENDPOINT_URL $AWS_EMULATOR_URL" SARVCRAWL_TEST_BACKEND=aws \
  cargo test --workspace --all-features --locked --test suite -- \
  --skip chromium_ --skip lambda:: --skip store:: --skip faults::
echo "--- the cargo-lambda loop (scripts/lambda-smoke.sh)"
bash scripts/lambda-smoke.sh
echo "--- the property-based API run (schemathesis)"
bash scripts/api-fuzz.sh
echo "--- the Python client (clients/python)"
bash scripts/python-client.sh

#!/usr/bin/env bash
# The README's cargo-lambda loop, run as a smoke test: `cargo lambda watch` serves the
# functions (built by the workspace build) against the AWS emulator; the health route answers
# through the function URL; a scrape is submitted by invoking `submit` with
# events/api/scrape.json; the worker is invoked once with events/worker-batch.json naming that
# job; the job is read back by invoking `status` with events/api/job.json. The event files get the fixture page's URL and the job's
# id; nothing else changes.
# Needs the emulator's environment (`source scripts/aws-emulator.sh`, which installs
# cargo-lambda into ./.venv) and the binaries `scripts/test.sh` builds.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export PATH="$root/.venv/bin:$PATH"

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# A page to scrape, on this machine.
mkdir -p "$work/site"
echo '<html><body><h1>Smoke</h1><p>served for the cargo-lambda loop</p></body></html>' \
  >"$work/site/index.html"
site_port=$(free_port)
python3 -m http.server --bind 127.0.0.1 --directory "$work/site" "$site_port" >/dev/null 2>&1 &
pids+=($!)

# Fresh resources, and the functions' environment.
"$root/target/debug/sarvcrawl" aws bootstrap --prefix "smoke-$$" --template template.yaml \
  | sed 's/^export //' >"$work/env"
{
  echo "SARVCRAWL_ALLOW_NETS=127.0.0.1/32"
  for v in AWS_ENDPOINT_URL AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION; do
    echo "$v=${!v}"
  done
} >>"$work/env"

# The runtime APIs of `cargo lambda watch`, serving the functions the workspace build made
# (`cargo lambda watch` alone would build each again, with its own features); each function
# runs as on Lambda, polling its runtime API.
port=$(free_port)
cargo lambda watch --only-lambda-apis --timeout 300 -A 127.0.0.1 -P "$port" >"$work/watch.log" 2>&1 &
pids+=($!)
python3 - "$port" <<'PY'
import socket, sys, time
for _ in range(300):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1).close()
        break
    except OSError:
        time.sleep(0.1)
PY
for f in status submit worker; do
  (
    set -a
    # shellcheck disable=SC1091
    source "$work/env"
    set +a
    AWS_LAMBDA_FUNCTION_NAME=$f AWS_LAMBDA_FUNCTION_VERSION=1 AWS_LAMBDA_FUNCTION_MEMORY_SIZE=1024 \
      AWS_LAMBDA_RUNTIME_API="http://127.0.0.1:$port/.rt/$f" RUST_LOG=warn \
      exec "$root/target/debug/$f"
  ) >"$work/$f.log" 2>&1 &
  pids+=($!)
done
for _ in $(seq 100); do
  curl -fs -m 5 "http://127.0.0.1:$port/lambda-url/status/api/health" >"$work/health" 2>/dev/null \
    && break
  sleep 0.2
done
grep -q '"ok"' "$work/health" \
  || { cat "$work/watch.log" "$work/status.log"; echo "the status function did not answer /api/health" >&2; exit 1; }

invoke() { # function, event file
  cargo lambda invoke "$1" -A 127.0.0.1 -P "$port" --data-file "$2" --output-format json
}
sed "s#https://example.com/#http://127.0.0.1:$site_port/#" events/api/scrape.json >"$work/scrape.json"
invoke submit "$work/scrape.json" >"$work/submitted"
job=$(python3 -c 'import json,sys; r=json.load(sys.stdin); assert r["statusCode"] == 202, r; print(json.loads(r["body"])["job_id"])' <"$work/submitted")

sed -e "s#job_01JQ0000000000000000000000#$job#g" -e "s#https://example.com/#http://127.0.0.1:$site_port/#" \
  events/worker-batch.json >"$work/batch.json"
invoke worker "$work/batch.json" >"$work/worked"
python3 -c 'import json,sys; r=json.load(sys.stdin); assert r["batchItemFailures"] == [], r' <"$work/worked"

sed "s#job_01JQ0000000000000000000000#$job#g" events/api/job.json >"$work/job.json"
invoke status "$work/job.json" >"$work/status"
python3 - "$work/status" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
job = json.loads(r["body"])
assert r["statusCode"] == 200 and job["status"] == "completed", job
assert "served for the cargo-lambda loop" in job["result"]["markdown"], job
print(f"cargo-lambda smoke: {job['job_id']} {job['status']}")
EOF

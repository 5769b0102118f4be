#!/usr/bin/env bash
# Cost benchmark: what a crawled page, a scrape job, a status poll and an idle hour cost on AWS.
# `sarvcrawl serve --backend aws` (one API process and WORKERS worker processes, release build)
# runs against the AWS emulator through a counting proxy (bench/cost_proxy.py) that records
# every DynamoDB, SQS and S3 call and prices DynamoDB's capacity units from the item sizes.
# The benchmark crawls a generated site of PAGES pages (50-100 KB each, about 90 links each),
# then runs one scrape job, then polls a job's status, then leaves the server idle for IDLE
# seconds; bench/cost_report.py prints calls and dollars with the price table it carries.
#
#   bash bench/cost.sh              # 300 pages, 2 worker processes, 45 s idle
#   PAGES=1000 WORKERS=4 bash bench/cost.sh
#   BIN=./target/profiling/sarvcrawl bash bench/cost.sh   # a build of your own (made with --features aws)
set -euo pipefail
cd "$(dirname "$0")/.."
PAGES=${PAGES:-300}
WORKERS=${WORKERS:-2}
IDLE=${IDLE:-45}
CONCURRENCY=${CONCURRENCY:-10}
work=$(mktemp -d)
pids=()
cleanup() {
  kill "${pids[@]}" 2>/dev/null || true
  kill "$(cat "$work"/nginx.pid 2>/dev/null)" 2>/dev/null || true
  stop_aws_emulator 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

source bench/site.sh
source scripts/aws-emulator.sh >&2
# BIN: another build to measure (a profiling build, say); by default this tree's release build.
BIN=${BIN:-}
if [ -z "$BIN" ]; then
  cargo build --release --locked --bin sarvcrawl --features aws >&2
  BIN=./target/release/sarvcrawl
fi
serve_site "$work/site" "$PAGES" "$work"

# Resources are made on the emulator directly: only the service's own calls are counted.
eval "$("$BIN" aws bootstrap --prefix "cost$$" --template template.yaml)"
proxy_port=$(free_port)
.venv/bin/python bench/cost_proxy.py "$AWS_ENDPOINT_URL" "$proxy_port" 2>"$work/proxy.log" &
pids+=($!)
for _ in $(seq 100); do curl -fs "127.0.0.1:$proxy_port/_cost" >/dev/null && break; sleep 0.1; done

key=bench-key-0123456789abcdef
api_port=$(free_port)
serve() {
  AWS_ENDPOINT_URL="http://127.0.0.1:$proxy_port" SARVCRAWL_API_KEYS="bench:$key" \
    "$BIN" serve --backend aws --allow-net 127.0.0.1/32 \
    --addr "127.0.0.1:$api_port" "$@" 2>>"$work/serve.log" &
  pids+=($!)
}
serve --workers 0
worker_pids=()
for _ in $(seq "$WORKERS"); do
  serve --workers 1 --workers-only
  worker_pids+=($!)
done
for _ in $(seq 100); do curl -fs "127.0.0.1:$api_port/api/health" >/dev/null && break; sleep 0.1; done

api() { curl -fs -H "authorization: Bearer $key" -H 'content-type: application/json' "$@"; }
field() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
workers_cpu() {
  local total=0
  for p in "${worker_pids[@]}"; do total=$(python3 -c "print($total + $(python3 bench/cpu.py "$p"))"); done
  echo "$total"
}
counts() { curl -fs "$@" "127.0.0.1:$proxy_port/_cost"; }
# Submits a job and waits for its end, polling once a second; prints the final job, and the
# number of API requests made to stderr's file $work/requests.
run_job() {
  local route=$1 body=$2 job status requests=1
  job=$(api -XPOST "127.0.0.1:$api_port/api/$route" -d "$body" | field '["job_id"]') || exit 1
  while :; do
    status=$(api "127.0.0.1:$api_port/api/jobs/$job") || { echo "status poll failed" >&2; exit 1; }
    requests=$((requests + 1))
    case "$(echo "$status" | field '["status"]')" in
      completed|failed|cancelled) break ;;
    esac
    sleep 1
  done
  echo "$requests" >"$work/requests"
  echo "$status"
}

# A crawl.
counts -XPOST >/dev/null
cpu0=$(workers_cpu)
crawl=$(run_job crawl "{\"url\":\"http://127.0.0.1:$site_port/\",\"limit\":$PAGES,\"max_depth\":50,\"use_sitemap\":false,\"max_concurrency\":$CONCURRENCY,\"formats\":[\"markdown\"]}")
sleep 1
cpu1=$(workers_cpu)
echo "$crawl" >"$work/crawl.json"
counts >"$work/crawl-counts.json"
crawl_requests=$(cat "$work/requests")

# One scrape job, its result read once.
counts -XPOST >/dev/null
cpu2=$(workers_cpu)
scrape=$(run_job scrape "{\"url\":\"http://127.0.0.1:$site_port/p/7.html\",\"formats\":[\"markdown\"]}")
job=$(echo "$scrape" | field '["job_id"]')
sleep 1
cpu3=$(workers_cpu)
counts >"$work/scrape-counts.json"
scrape_requests=$(cat "$work/requests")

# Status polls of the finished scrape.
polls=100
counts -XPOST >/dev/null
for _ in $(seq "$polls"); do api "127.0.0.1:$api_port/api/jobs/$job" >/dev/null; done
counts >"$work/poll-counts.json"

# A page of a crawl's results.
counts -XPOST >/dev/null
crawl_id=$(echo "$crawl" | field '["job_id"]')
start=$(date +%s.%N)
api "127.0.0.1:$api_port/api/jobs/$crawl_id/results?limit=100" >/dev/null
results_secs=$(python3 -c "import time; print(time.time() - $start)")
counts >"$work/results-counts.json"

# Idle.
counts -XPOST >/dev/null
sleep "$IDLE"
counts >"$work/idle-counts.json"

python3 bench/cost_report.py "$work" \
  --crawl-cpu "$(python3 -c "print($cpu1 - $cpu0)")" --crawl-requests "$crawl_requests" \
  --scrape-cpu "$(python3 -c "print($cpu3 - $cpu2)")" --scrape-requests "$scrape_requests" \
  --polls "$polls" --results-secs "$results_secs" --idle "$IDLE" --workers "$WORKERS"

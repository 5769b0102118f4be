#!/usr/bin/env bash
# Crawl benchmark: a site served by nginx on loopback, crawled through `sarvcrawl serve`
# (release build) with Markdown extraction. The site is generated (PAGES pages of 50-100 KB) or,
# with SITE=docs, a real one: Python 3.11's HTML documentation (530 pages, bench/site.sh).
# Prints pages per second, CPU milliseconds per page of the server process, its peak RSS and
# the CPU per page of each stage (fetch, parse, links, Markdown, store, bookkeeping).
#
# With RENDER=1 every page is loaded in headless Chromium (`render: true`), RENDER_PAGES at
# once (the server's --render-pages), and the CPU time counts the browser's processes too.
#
#   bash bench/crawl.sh            # 2000 pages
#   SITE=docs bash bench/crawl.sh  # Python's documentation
#   PAGES=500 bash bench/crawl.sh
#   RENDER=1 bash bench/crawl.sh   # 200 rendered pages, 4 at once
#   LOAD=300 bash bench/crawl.sh   # and 300 users submit a scrape each meanwhile, the crawl's
#                                  # status polled all along: their latencies (bench/load.py)
#   READS=5 SITE=docs bash bench/crawl.sh  # then every document read 5 times through the
#                                          # job's results: the server's CPU per document read
#   BACKEND=aws bash bench/crawl.sh  # the worker path: DynamoDB, SQS and S3 on the emulator
#                                    # (its own CPU is not counted; pages/s are the emulator's)
set -euo pipefail
cd "$(dirname "$0")/.."
RENDER=${RENDER:-}
SITE=${SITE:-generated}
RENDER_PAGES=${RENDER_PAGES:-4}
PAGES=${PAGES:-$([ -n "$RENDER" ] && echo 200 || echo 2000)}
CONCURRENCY=${CONCURRENCY:-32}
render_flag=$([ -n "$RENDER" ] && echo true || echo false)
work=$(mktemp -d)
trap 'kill $(cat "$work"/nginx.pid 2>/dev/null) 2>/dev/null || true; kill "$serve_pid" 2>/dev/null || true; [ "$(type -t stop_aws_emulator)" != function ] || stop_aws_emulator; rm -rf "$work"' EXIT
serve_pid=

source bench/site.sh
# BIN: another build to measure (an earlier one, say); by default this tree's release build.
BIN=${BIN:-}
BACKEND=${BACKEND:-local}
if [ -z "$BIN" ]; then
  cargo build --release --locked --bin sarvcrawl $([ "$BACKEND" = aws ] && echo --features aws) >&2
  BIN=./target/release/sarvcrawl
fi
backend_args=
if [ "$BACKEND" = aws ]; then
  # shellcheck source=scripts/aws-emulator.sh
  source scripts/aws-emulator.sh
  eval "$("$BIN" aws bootstrap --prefix "bench$$" --template template.yaml)"
  backend_args="--backend aws"
  # The server reaches the emulator through nginx, which keeps its connections open as AWS does
  # (KEEPALIVE=0: straight to the emulator, a new connection a call).
  [ "${KEEPALIVE:-1}" = 0 ] || FRONT_UPSTREAM=$AWS_ENDPOINT_URL
fi
if [ "$SITE" = docs ]; then
  serve_docs "$work"
  PAGES=$site_pages
else
  serve_site "$work/site" "$PAGES" "$work"
fi
port=$site_port
[ -z "${FRONT_UPSTREAM:-}" ] || export AWS_ENDPOINT_URL="http://127.0.0.1:$front_port"
api_port=$(free_port)

# Keys: the crawl's user, and one per user of the load.
keys="crawler:bench-crawler-key-0001"
for n in $(seq 0 $((${LOAD:-0} - 1))); do keys="$keys,load-$n:load-key-for-user-$n"; done
SARVCRAWL_API_KEYS=$keys SARVCRAWL_STAGE_CPU=1 "$BIN" serve --addr "127.0.0.1:$api_port" --data-dir "$work/data" \
  --allow-net 127.0.0.1/32 --render-pages "$RENDER_PAGES" $backend_args ${SERVE_ARGS:-} 2>"$work/serve.log" &
serve_pid=$!
for _ in $(seq 100); do curl -fs "127.0.0.1:$api_port/api/health" >/dev/null && break; sleep 0.1; done

# CPU seconds of the server, its exited children and the processes still running below it.
cpu() { python3 bench/cpu.py "$serve_pid"; }
threads() { python3 bench/threads.py "$serve_pid"; }
cpu0=$(cpu)
threads0=$(threads)
auth="authorization: Bearer bench-crawler-key-0001"
job=$(curl -fs -XPOST "127.0.0.1:$api_port/api/crawl" -H 'content-type: application/json' -H "$auth" \
  -d "{\"url\":\"http://127.0.0.1:$port/\",\"limit\":$PAGES,\"max_depth\":50,\"use_sitemap\":false,\"max_concurrency\":$CONCURRENCY,\"formats\":[\"markdown\",\"metadata\"],\"render\":$render_flag}" \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["job_id"])')
load_pid=
if [ -n "${LOAD:-}" ]; then
  python3 bench/load.py "127.0.0.1:$api_port" "$job" bench-crawler-key-0001 "http://127.0.0.1:$port/" "$LOAD" > "$work/load.txt" &
  load_pid=$!
fi
# The job's status is polled every 0.2 s, or every 2 s against the emulator (a crawl of a minute
# or more there, and each poll's DynamoDB and S3 calls would count a share of the API's CPU
# among the worker path's).
every=$([ "$BACKEND" = aws ] && echo 2 || echo 0.2)
status=$(python3 bench/wait.py "127.0.0.1:$api_port" "$job" bench-crawler-key-0001 "$every")
cpu1=$(cpu)
threads1=$(threads)
[ -z "$load_pid" ] || wait "$load_pid"
# The peak of the crawl (and the load), before a dump or the reads below read documents back.
rss_kb=$(awk '/^VmHWM/ {print $2}' "/proc/$serve_pid/status")
# DUMP=FILE: every document of the crawl into FILE (to compare two builds' output).
[ -z "${DUMP:-}" ] || python3 bench/dump.py "127.0.0.1:$api_port" "$job" bench-crawler-key-0001 "$DUMP"
reads=
if [ -n "${READS:-}" ]; then
  read_cpu0=$(cpu)
  reads=$(python3 bench/reads.py "127.0.0.1:$api_port" "$job" bench-crawler-key-0001 "$READS")
  read_cpu1=$(cpu)
fi
# The server prints its CPU time by stage when it stops.
kill -TERM "$serve_pid"
wait "$serve_pid" || true
stages=$(sed -n 's/.*stage-cpu //p' "$work/serve.log")
[ -n "$stages" ] || stages='{}'
echo "$status" | python3 bench/report.py "$cpu1" "$cpu0" "$rss_kb" "$stages" "$threads0" "$threads1"
[ -z "$load_pid" ] || cat "$work/load.txt"
if [ -n "$reads" ]; then
  echo "$reads" | head -1
  python3 -c 'import sys; a, b, n = map(float, sys.argv[1:]); print(f"read CPU          {(b - a) * 1e6 / n:.0f} us a document (server process)")' \
    "$read_cpu0" "$read_cpu1" "$(echo "$reads" | tail -1)"
fi
[ -n "${DEBUG:-}" ] && echo "$status" && cat "$work/nginx-error.log"
size=$(du -sb "$work/site" | cut -f1)
echo "site              $SITE, $PAGES pages, $((size / PAGES / 1024)) KB average"
echo "backend           $BACKEND"
echo "cores             $(nproc)"
[ -z "$RENDER" ] || echo "rendered          $RENDER_PAGES pages at once in $(chromium --version 2>/dev/null || echo Chromium)"

#!/usr/bin/env bash
# Two builds' crawl benchmark, their runs alternated: this kind of machine's speed drifts (by a
# third between days, by a tenth within minutes), so only runs taken side by side compare.
# Prints every run's figures, then each build's median and range of every figure.
#
#   BEFORE=/tmp/sarvcrawl-before AFTER=./target/release/sarvcrawl SITE=docs bash bench/alternate.sh
#   ROUNDS=5 ...                      # runs of each build (default 3)
#   AFTER=./target/release/sarvcrawl  # one build alone, ROUNDS times: the benchmark's own spread
#
# Every setting of bench/crawl.sh passes through (SITE, BACKEND, PAGES, CONCURRENCY ...).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
AFTER=${AFTER:?AFTER: the build to measure (and BEFORE, the build to compare it with)}
BEFORE=${BEFORE:-}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

builds=(after)
[ -z "$BEFORE" ] || builds=(before after)
for round in $(seq "$ROUNDS"); do
  for build in "${builds[@]}"; do
    bin=$([ "$build" = before ] && echo "$BEFORE" || echo "$AFTER")
    echo "round $round of $ROUNDS: $build ($bin)" >&2
    BIN=$bin bash bench/crawl.sh > "$out/$build-$round.txt"
  done
done
python3 bench/alternated.py "$out" "${builds[@]}"

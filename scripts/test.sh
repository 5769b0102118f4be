#!/usr/bin/env bash
# Runs every check and test of SarvCrawl: formatting, lints, unit tests, and the black-box
# suite against a real `sarvcrawl serve` with fixture sites on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)" >&2; exit 1; }
rustup component add rustfmt clippy >/dev/null 2>&1 || true

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The black-box tests spawn the server binary: build it before they run.
cargo build --locked --bin sarvcrawl
cargo test --workspace --locked

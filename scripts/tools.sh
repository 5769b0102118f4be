#!/usr/bin/env bash
# Installs the AWS emulator (moto server), the template checkers (cfn-lint, SAM CLI), the
# API fuzzer (schemathesis), cargo-lambda and the reference webhook verifier (standardwebhooks)
# into ./.venv when missing, each at the version in scripts/tools-versions.txt, their
# dependencies too: a new release of any of them can change what the tests see (moto 5.2.6, for
# one, refuses `HeadObject` to a principal whose policy allows `s3:GetObject`, which is what AWS
# asks for it, so the status function's artifact links would fail against it). A .venv
# installed from another tools-versions.txt is brought to this one's versions.
set -euo pipefail
venv="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.venv"
versions="$(dirname "${BASH_SOURCE[0]}")/tools-versions.txt"
if ! cmp -s "$versions" "$venv/.tools-versions" || [ ! -x "$venv/bin/moto_server" ] \
  || [ ! -x "$venv/bin/cfn-lint" ] || [ ! -x "$venv/bin/sam" ] || [ ! -x "$venv/bin/schemathesis" ] \
  || [ ! -x "$venv/bin/cargo-lambda" ] || ! "$venv/bin/python" -c 'import standardwebhooks' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -c "$versions" \
    'moto[server]' cfn-lint aws-sam-cli schemathesis cargo-lambda standardwebhooks
  cp "$versions" "$venv/.tools-versions"
fi

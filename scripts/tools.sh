#!/usr/bin/env bash
# Installs the AWS emulator (moto server), the template checkers (cfn-lint, SAM CLI), the
# API fuzzer (schemathesis), cargo-lambda and the reference webhook verifier (standardwebhooks)
# into ./.venv when missing. moto is pinned: 5.2.6 refuses `HeadObject` to a principal whose
# policy allows `s3:GetObject` (which is what AWS asks for it), so the status function's
# artifact links would fail against it.
set -euo pipefail
venv="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.venv"
if [ ! -x "$venv/bin/moto_server" ] || [ ! -x "$venv/bin/cfn-lint" ] || [ ! -x "$venv/bin/sam" ] \
  || [ ! -x "$venv/bin/schemathesis" ] || [ ! -x "$venv/bin/cargo-lambda" ] \
  || ! "$venv/bin/python" -c 'import standardwebhooks' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    'moto[server]==5.2.5' 'cfn-lint==1.*' 'aws-sam-cli==1.*' 'schemathesis==4.*' 'cargo-lambda==1.*' \
    'standardwebhooks==1.*'
fi

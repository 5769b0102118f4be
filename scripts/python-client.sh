#!/usr/bin/env bash
# The Python client (clients/python): installed as a user would install it (`pip install
# ./clients/python`, with its test extras, whatever versions of its dependencies are current)
# into ./.venv-client, apart from the test tools' pinned ./.venv, then its tests run against a
# real `sarvcrawl serve` (the debug build, or SARVCRAWL_BIN).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv-client"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "$root/clients/python[test]"
cd "$root/clients/python"
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests

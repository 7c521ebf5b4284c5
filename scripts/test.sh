#!/usr/bin/env bash
# Runs every check CI runs: installs the pinned dependencies into .venv, lints, validates
# every stack, then the tests. Extra arguments go to pytest (e.g. -k render, -m e2e).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt

echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== stacks"
.venv/bin/python -m components validate --all
echo "== tests"
.venv/bin/python -m pytest "$@"

#!/usr/bin/env bash
# Runs every check CI runs: installs the pinned dependencies into .venv-dev, lints,
# validates every stack, then the tests. Extra arguments go to pytest (e.g. -k render,
# -m e2e).
#
# The tests get their own environment: .venv is the one Pulumi runs the program in, and
# the cloud SDKs the tests need there would make every kind stack download the GCP, AWS
# and EKS plugins (components/resources/program_env.py).
set -euo pipefail
cd "$(dirname "$0")/.."

# What the tests run that this script does not install (it never changes a host): one
# line naming it, before anything is built.
if ! command -v zsh >/dev/null 2>&1; then
  echo "error: zsh is not installed, and the shell-completion tests run in it; install it (apt-get install zsh, or brew install zsh) and run again" >&2
  exit 1
fi

PYTHON="${PYTHON:-python3}"
ENV=.venv-dev
# One left half-made by an interrupted run is rebuilt, not reused.
if { [ -e "$ENV" ] || [ -L "$ENV" ]; } && ! "$ENV/bin/python" -c 'import sys, pip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "$ENV is incomplete or too old: rebuilding it"
  rm -rf "$ENV"
fi
if [ ! -x "$ENV/bin/python" ]; then
  "$PYTHON" -m venv "$ENV"
fi
"$ENV/bin/python" -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
# The `mkf` command (pyproject.toml) from this checkout: tests run it as a user would.
if [ ! -x "$ENV/bin/mkf" ] || [ pyproject.toml -nt "$ENV/bin/mkf" ]; then
  "$ENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -e .
fi

# The real tier: kube-apiserver, etcd, kube-controller-manager and Kueue built from the pinned
# Go modules in tools/ (Go's caches make a rebuild a link); without Go its tests skip, saying so.
if command -v go >/dev/null 2>&1; then
  echo "== real engines (python -m loopback build; and lws, the LeaderWorkerSet controller)"
  "$ENV/bin/python" -m loopback build
  "$ENV/bin/python" -m loopback build lws
  export KUBEBUILDER_ASSETS="$PWD/.tools/bin"
  # The kind tier (tests/test_kind_tier.py): kind, its node image and the fleet's images built
  # from the same modules, served by a registry mirror; only where a Docker engine answers
  # (this script never installs or starts one: `python -m kindnode host --prepare` does).
  if docker info >/dev/null 2>&1; then
    echo "== kind tier (python -m kindnode build)"
    "$ENV/bin/python" -m kindnode build
  else
    echo "== kind tier: no Docker engine answers, so its tests skip (python -m kindnode host --prepare starts one)"
  fi
else
  echo "== real engines: go is not on PATH, so the real tier is skipped (install Go 1.26+)"
fi
echo "== ruff"
"$ENV/bin/ruff" check .
"$ENV/bin/ruff" format --check .
echo "== stacks"
"$ENV/bin/python" -m components validate --all
echo "== tests"
"$ENV/bin/python" -m pytest "$@"

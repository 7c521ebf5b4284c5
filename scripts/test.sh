#!/usr/bin/env bash
# The project's tests, by tier (tests/conftest.py says what each needs):
#
#   bash scripts/test.sh          every check CI runs: lint, every stack validated, the
#                                 builds, then the unit, emulated, real and kind tiers, one
#                                 after the other
#   bash scripts/test.sh --fast   lint, stacks and the unit tier only: offline, no Go, no
#                                 Docker (what to run while editing)
#   bash scripts/test.sh --tier real [PYTEST ARGS...]   one tier (unit, emulated, real, kind)
#
# Extra arguments go to each pytest run (e.g. -k render, -x). Each phase's wall time is
# printed at the end. A tier whose prerequisite is missing here skips, saying what provides
# it; under CI (CI=true) every tier is required and a skip fails the run.
#
# The tests get their own environment: .venv is the one Pulumi runs the program in, and
# the cloud SDKs the tests need there would make every kind stack download the GCP, AWS
# and EKS plugins (components/resources/program_env.py).
set -uo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; }
fast=false
tiers="unit emulated real kind"
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --fast) fast=true; tiers="unit" ;;
    --tier)
      [ $# -ge 2 ] || { echo "error: --tier needs one of: unit emulated real kind" >&2; exit 2; }
      case "$2" in unit|emulated|real|kind) tiers="$2" ;;
        *) echo "error: --tier $2: no such tier; choose unit, emulated, real or kind" >&2; exit 2 ;;
      esac
      shift ;;
    -h|--help) usage; exit 0 ;;
    *) args+=("$1") ;;
  esac
  shift
done

# One line per phase, printed again at the end.
TIMES=()
failed=()
phase() {  # name command...: runs it, times it, remembers a failure and goes on
  local name="$1" started rc
  shift
  echo "== $name"
  started=$(date +%s)
  "$@"
  rc=$?
  TIMES+=("$(printf '%-34s %6d s  %s' "$name" "$(( $(date +%s) - started ))" \
    "$([ "$rc" -eq 0 ] && echo ok || echo "FAILED ($rc)")")")
  [ "$rc" -eq 0 ] || failed+=("$name")
  return "$rc"
}
summary() {
  echo
  echo "== wall time per phase (scripts/test.sh)"
  printf '%s\n' "${TIMES[@]}"
}
finish() {
  summary
  if [ "${#failed[@]}" -gt 0 ]; then
    echo "failed: ${failed[*]}" >&2
    exit 1
  fi
  exit 0
}

# What the tests run that this script does not install (it never changes a host): one
# line naming it, before anything is built. The shell-completion tests (unit tier) run zsh.
if ! command -v zsh >/dev/null 2>&1; then
  echo "error: zsh is not installed, and the shell-completion tests run in it; install it (apt-get install zsh, or brew install zsh) and run again" >&2
  exit 1
fi

PYTHON="${PYTHON:-python3}"
ENV=.venv-dev
make_env() {
  # One this script made (its mark inside) and an interrupted run left half-made is rebuilt,
  # not reused; one without the mark is the user's and is never removed.
  if { [ -e "$ENV" ] || [ -L "$ENV" ]; } && ! "$ENV/bin/python" -c 'import sys, pip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    if [ ! -e "$ENV/.made-by-test.sh" ]; then
      echo "error: $ENV is not an environment scripts/test.sh made, and it cannot run the tests (it needs Python 3.11 or newer with pip); move it away (mv $ENV $ENV.mine) and run again" >&2
      return 1
    fi
    echo "$ENV is incomplete or too old: rebuilding it"
    rm -rf "$ENV"
  fi
  if [ ! -x "$ENV/bin/python" ]; then
    "$PYTHON" -m venv "$ENV" || return 1
    touch "$ENV/.made-by-test.sh"
  fi
  # pip is asked only when the pins changed since the environment was made. --no-compile:
  # Python compiles a module when it is first imported; pip would compile every module of
  # every package up front (the cloud SDKs' thousands: 45 of this step's 70 s on 2 cores).
  if [ ! -f "$ENV/.pins" ] || ! cmp -s "$ENV/.pins" <(cat requirements*.txt pyproject.toml); then
    "$ENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile -r requirements-dev.txt \
      || return 1
    # The `mkf` command (pyproject.toml) from this checkout: tests run it as a user would.
    "$ENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -e . || return 1
    cat requirements*.txt pyproject.toml >"$ENV/.pins"
  fi
}
phase "environment (.venv-dev)" make_env || finish

phase "ruff" "$ENV/bin/ruff" check .
phase "ruff format" "$ENV/bin/ruff" format --check .
phase "stacks (validate --all)" "$ENV/bin/python" -m components validate --all

# Line coverage of the product code, measured in the unit and emulated tiers (each appends
# to one data file) and in the Python processes their tests start; the real and kind tiers
# run timed fleets, which a tracer would slow, and the fast loop skips it.
if ! $fast; then
  rm -f .coverage .coverage.*
  # One data file for the run, wherever a test starts a Python process (its cwd may be a
  # temporary folder or a copy of the project, which must stay clean).
  export COVERAGE_FILE="$PWD/.coverage"
fi
run_tier() {  # tier
  # The unit and emulated tiers on every core: most of their time is commands run as
  # processes, as a user runs them, and in-process servers (emulated, 459 tests: 243 s on 2
  # cores against 460 s in one, upstream cache cold, coverage on). The real and kind tiers
  # share fleets and servers within a run, so they run in one.
  local workers=() measure=()
  case "$1" in unit|emulated) workers=(-n auto) ;; esac
  if ! $fast && { [ "$1" = unit ] || [ "$1" = emulated ]; }; then
    measure=(--cov --cov-append --cov-report=)
  fi
  # Each tier gets a temporary folder of its own, removed when it passes: a process that
  # ends without running its atexit hooks (an xdist worker, a server a test SIGKILLs) leaves
  # there what the kubernetes clients' kubeconfig loaders wrote (each inline certificate and
  # key as a /tmp/tmpXXXXXXXX file, removed only at a normal exit), not in the machine's /tmp.
  # A tier that fails keeps it, with its tests' folders and logs, and says where.
  local tmp
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/mkf-test-$1.XXXXXX") || return 1
  TMPDIR="$tmp" "$ENV/bin/python" -m pytest "tests/$1" "${workers[@]}" "${measure[@]}" "${args[@]}"
  local rc=$?
  # pytest's 5 is "no test collected": a failure, unless -k, -m or --deselect chose so.
  if [ "$rc" -eq 5 ]; then
    local arg
    for arg in "${args[@]}"; do
      case "$arg" in -k*|-m*|--deselect*) rc=0 ;; esac
    done
  fi
  if [ "$rc" -eq 0 ]; then
    rm -rf "$tmp"
  else
    echo "tier $1 failed: its temporary files (its tests' folders and logs) are kept in $tmp"
  fi
  return "$rc"
}

# The builds the later tiers need; each is a no-op when its inputs are unchanged. Without Go
# or a Docker engine the tiers that need them skip (under CI: fail), saying so.
builds() {
  if ! command -v go >/dev/null 2>&1; then
    echo "Go is not on PATH: the real and kind tiers will skip (install Go 1.26.8, the version tools/go.mod names)"
    return 0
  fi
  # Every Go binary the real and kind tiers use, here, before they run side by side: two
  # tiers building the same binary at once would each write it while the other runs it.
  phase "build: real engines (loopback build)" "$ENV/bin/python" -m loopback build etcd \
    kube-apiserver kube-controller-manager kube-scheduler kueue lws kwok promtool kustomize \
    pulumi pulumi-language-python pulumi-resource-kubernetes || return 1
  export KUBEBUILDER_ASSETS="$PWD/.tools/bin"
  case " $tiers " in *" kind "*) ;; *) return 0 ;; esac
  if [ "$(id -u)" -ne 0 ]; then
    echo "not root: python -m kindnode build (debootstrap) needs root, so it is not run here; the kind tier runs only if it was built before (sudo .venv-dev/bin/python -m kindnode build), and skips otherwise"
  elif docker info >/dev/null 2>&1; then
    # kind, its node image and the fleet's images built from the same modules, served by a
    # registry mirror (this script never installs or starts a Docker engine:
    # `python -m kindnode host --prepare` does).
    phase "build: kind tier (kindnode build)" "$ENV/bin/python" -m kindnode build || return 1
  else
    echo "no Docker engine answers: the kind tier will skip (python -m kindnode host --prepare starts one)"
  fi
}

# The tiers one after the other, each needing a little more of the machine than the last.
# The kind tier runs alone: beside the others (as it did until 2026-11-30, 34 minutes for
# the real and kind tiers together against 45 one after the other on 2 cores), its
# clusters' kubeadm and Kueue's probes starved at loads of 14 to 35, and three CI runs in a
# row failed there (`kind create cluster` inside kubeadm, a Kueue restarted by its liveness
# probe) while each test passed alone. Ctrl-C reaches the running pytest (the terminal's
# process group), whose fixtures tear their fleets down; then this script stops.
trap 'exit 130' INT TERM
for tier in $tiers; do
  if [ "$tier" != unit ] && [ -z "${built:-}" ]; then
    builds
    built=1
  fi
  phase "tier: $tier" run_tier "$tier"
  # pytest's 2: interrupted (a signal to it, tests/helpers/sigterm.py, or an error while
  # collecting): the run stops there rather than start the next tier's fleets.
  if [ "$?" -eq 2 ]; then
    echo "tier $tier was interrupted (pytest's exit 2: a signal, or an error collecting its tests): the later tiers were not run"
    break
  fi
done

if ! $fast && [ -f .coverage ]; then
  phase "coverage (product code)" "$ENV/bin/python" scripts/coverage_table.py
fi
finish

#!/usr/bin/env bash
# One entry point for people and CI. Creates .venv with the pinned versions on first use (again
# only when pyproject.toml or constraints.txt change), then:
#   ./dev.sh run [ENV]     check + plan of inventories/ENV (default: example), the main job
#   ./dev.sh test [ARGS]   the whole test suite (ARGS go to pytest)
#   ./dev.sh bench [ARGS]  check + plan benchmark on generated environments (figures only)
set -euo pipefail
cd "$(dirname "$0")"

PYTHON=${PYTHON:-python3}
VENV=.venv

setup() {
  if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
    echo "dev.sh: needs Python 3.11 (ansible-core 2.19 is the newest Ansible for it); set PYTHON=python3.11" >&2
    exit 2
  fi
  local stamp="$VENV/.installed" want
  want=$(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    return
  fi
  echo "dev.sh: installing pinned dependencies into $VENV ..." >&2
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
  if ! "$VENV/bin/python" -m pip install --disable-pip-version-check -c constraints.txt -e '.[test]' \
      >"$VENV/install.log" 2>&1; then
    tail -n 30 "$VENV/install.log" >&2
    echo "dev.sh: installing failed; the whole log is $VENV/install.log" >&2
    exit 2
  fi
  echo "$want" >"$stamp"
}

command=${1:-}
shift || true
case "$command" in
  run)
    setup
    env=${1:-example}
    "$VENV/bin/python" -m infra check "inventories/$env"
    "$VENV/bin/python" -m infra plan "inventories/$env"
    ;;
  test)
    setup
    exec "$VENV/bin/python" -m pytest "$@"
    ;;
  bench)
    setup
    exec "$VENV/bin/python" tests/benchmarks/bench_check_plan.py "$@"
    ;;
  *)
    sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'
    [ "$command" = "-h" ] || [ "$command" = "--help" ] || exit 2
    ;;
esac

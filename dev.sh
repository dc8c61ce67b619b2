#!/usr/bin/env bash
# One entry point for people and CI. Creates .venv with the pinned versions on first use (again
# only when pyproject.toml or constraints.txt change), then:
#   ./dev.sh run           the main job, whole, on the sandbox: check, plan, fit, render, start sandbox
#                          hosts, bootstrap, verify, local control plane, pulumi up, probes, report, clean up
#                          (installs the host tools as root and builds the Go tools first, once)
#   ./dev.sh run ENV [FLAGS]  python -m infra run inventories/ENV FLAGS: check, plan, fit, render; --hosts,
#                          --real-cluster, --all (both), --keep-hosts (a warm re-run) add the later stages
#   ./dev.sh test [ARGS]   the Go tools (once), ruff, mypy, yamllint, ansible-lint, then the whole test
#                          suite (ARGS go to pytest; the VM tier runs beside the rest unless ARGS name tests)
#   ./dev.sh bench [ARGS]  check + plan benchmark on generated environments (figures only)
#   ./dev.sh tools [--print-path]  build the pinned Go tools into the user's cache (or print their bin folders)
#   ./dev.sh cluster up|down|status|kubeconfig  a local control plane on 127.0.0.1 from those tools
set -euo pipefail
cd "$(dirname "$0")"

PYTHON=${PYTHON:-python3}
VENV=.venv

setup() {
  if ! "$PYTHON" -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 13))' 2>/dev/null; then
    echo "dev.sh: needs Python 3.11, 3.12 or 3.13 (what ansible-core 2.19 supports); set PYTHON=python3.X" >&2
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

# Whether pytest's arguments name tests (a file, folder or node id): then they run as asked, in one run.
names_tests() {
  local arg
  for arg in "$@"; do [[ $arg != -* && -e ${arg%%::*} ]] && return 0; done
  return 1
}

# One step of the test command, announced, then timed: CI shows where its budget goes.
timed() {
  local name=$1 started=$SECONDS
  shift
  echo "dev.sh: $name" >&2
  "$@"
  echo "dev.sh: $name done in $((SECONDS - started)) s" >&2
}

command=${1:-}
shift || true
case "$command" in
  run)
    setup
    if [ $# -eq 0 ]; then
      set -- sandbox --all
      if ! command -v podman >/dev/null || ! command -v mmdebstrap >/dev/null; then
        [ "$(id -u)" = 0 ] || { echo "dev.sh: the sandbox hosts need podman and mmdebstrap: run" \
          "'sudo tests/hosts/sandbox.sh install' once" >&2; exit 2; }
        tests/hosts/sandbox.sh install
      fi
      tools/build.sh
    fi
    env=$1
    shift
    exec "$VENV/bin/python" -m infra run "inventories/$env" "$@"
    ;;
  test)
    setup
    # tests/live runs the pinned Go tools: built on first use (about 25 min cold), skipped once built.
    timed "Go tools" tools/build.sh
    timed "ruff check" "$VENV/bin/ruff" check --quiet .
    timed "mypy (strict on infra/)" "$VENV/bin/mypy"
    # The host layer's Ansible (configs: .yamllint, .ansible-lint); ansible-lint wants the venv's
    # ansible-playbook first on PATH for its syntax checks.
    timed "yamllint ansible/ tests/hosts/" "$VENV/bin/yamllint" --strict ansible/ tests/hosts/
    timed "ansible-lint (production profile)" env PATH="$PWD/$VENV/bin:$PATH" "$VENV/bin/ansible-lint" --nocolor -q
    # pytest ends with the time of each tier (tests/conftest.py), then its own closing line.
    names_tests "$@" && exec "$VENV/bin/python" -m pytest "$@"
    # The whole suite: the VM tier (tests/hosts/test_vm_*.py, half an hour of software emulation that
    # keeps about one core busy) runs beside the rest, which never touches the VM, as the VM tier never
    # touches the container hosts; one after the other left a core idle for that half hour.
    mkdir -p .state
    echo "dev.sh: the VM tier runs beside the rest: tail -f .state/vm-tier.log" >&2
    "$VENV/bin/python" -m pytest -p no:cacheprovider "$@" tests/hosts/test_vm_*.py >.state/vm-tier.log 2>&1 &
    vm_tier=$!
    rest=0
    "$VENV/bin/python" -m pytest --ignore-glob='tests/hosts/test_vm_*.py' "$@" || rest=$?
    vm=0
    wait "$vm_tier" || vm=$?
    echo "dev.sh: the VM tier (.state/vm-tier.log):" >&2
    cat .state/vm-tier.log
    echo "dev.sh: the rest $( ((rest == 0)) && echo passed || echo "failed (pytest exit $rest)"), the VM tier" \
      "$( ((vm == 0)) && echo passed || echo "failed (pytest exit $vm)")" >&2
    exit $((rest != 0 ? rest : vm))
    ;;
  bench)
    setup
    exec "$VENV/bin/python" tests/benchmarks/bench_check_plan.py "$@"
    ;;
  tools)
    exec tools/build.sh "$@"
    ;;
  cluster)
    exec tools/cluster.sh "$@"
    ;;
  *)
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
    [ "$command" = "-h" ] || [ "$command" = "--help" ] || exit 2
    ;;
esac

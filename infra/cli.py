"""`python -m infra`: check an environment before anything is touched, and plan its capacity and cost.

Exit codes are part of the interface, for CI and for the playbooks that run `check` first:
0 no errors (warnings allowed), 1 the spec has errors, 2 the input is unusable (missing folder,
YAML syntax, unknown keys, wrong types).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

import yaml

from infra.checks import RULES, Finding, Rule, has_errors, run_checks
from infra.hosts.hostvars import environment_host_vars
from infra.hosts.stages import HostStages, StageResult
from infra.model.resolve import resolve
from infra.model.scheduler import kubespray_variables, scheduler_configuration_of
from infra.planning.fit import DRAWS, fit
from infra.planning.fit import render as render_fit
from infra.planning.plan import build_plan, render_table
from infra.render import RenderError, render, write
from infra.spec import Environment, SpecError, load_environment

EXIT_OK, EXIT_ERRORS, EXIT_UNUSABLE = 0, 1, 2

DESCRIPTION = """\
Plan Kubernetes node pools by workload profile, from one inventory folder.

  check INVENTORY   preflight rules; every finding with code, file, field and fix
  plan INVENTORY    capacity and cost per pool (runs check first)
  fit INVENTORY     place the declared workloads as the scheduler would, and N-1 per pool (runs check first)
  propose INVENTORY the cheapest pool sizes, machines and MIG layouts for the workloads, N-1 safe (MILP)
  render INVENTORY  every object and Helm release of the cluster layer as YAML, validated offline
  hostvars INVENTORY  what the host layer applies to each host, as JSON (runs check first)
  scheduler INVENTORY the kube-scheduler configuration fit simulates, as YAML; --kubespray as Kubespray's variables
  run INVENTORY     the main job's stages in order (check, plan, fit, render), with progress per stage;
                    --hosts adds the host stages on sandbox hosts (start, bootstrap, verify, report, clean up),
                    --real-cluster the real Pulumi path (control plane, pulumi up, probes, teardown), --all both
  rules             every rule: code, severity, what it guards against, how to fix

check prints its report on stdout (check ... > report.txt); plan and fit print their result on stdout
and any findings on stderr; with --json each prints JSON alone on stdout, findings included on errors.

exit codes: 0 no errors (warnings allowed), 1 errors found (fit: a replica does not fit; propose: no
proposal), 2 unusable input
"""


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        code: int = args.run(args)
        return code
    except BrokenPipeError:  # `python -m infra plan ... | head`
        sys.stderr.close()
        return EXIT_OK


def _non_negative(text: str) -> int:
    """A count for an option: a whole number, 0 or more."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 0 or more")
    return int(text)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m infra", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    check = commands.add_parser("check", help="run the preflight rules on an inventory",
                                description="Run every preflight rule and print all findings at once, on stdout.")
    check.add_argument("inventory", metavar="INVENTORY", help="inventory folder, e.g. inventories/example")
    check.add_argument("--json", action="store_true", help="print findings as JSON, alone on stdout")
    check.set_defaults(run=_check)

    plan = commands.add_parser("plan", help="print the capacity and cost plan",
                               description="Check the inventory, then print capacity and cost per pool.")
    plan.add_argument("inventory", metavar="INVENTORY", help="inventory folder, e.g. inventories/example")
    plan.add_argument("--json", action="store_true",
                      help="print the plan as JSON on stdout (the findings as JSON when there are errors)")
    plan.set_defaults(run=_plan)

    fit = commands.add_parser("fit", help="place the declared workloads on the pools",
                              description="Check the inventory, then place every replica of its workloads as "
                                          "quota admission and kube-scheduler would, and lose each pool's "
                                          "biggest host (N-1). Exit 1 when a replica is not placed.")
    fit.add_argument("inventory", metavar="INVENTORY", help="inventory folder, e.g. inventories/example")
    fit.add_argument("--json", action="store_true",
                     help="print the fit as JSON on stdout (the findings as JSON when there are errors)")
    fit.add_argument("--require-n-1", action="store_true",
                     help="exit 1 also when a pool that loses its biggest host leaves a pod unplaced")
    fit.add_argument("--require-guaranteed", action="store_true",
                     help="exit 1 also when a workload's count placed depends on how the scheduler breaks ties "
                          "between equally scored nodes (kube-scheduler draws at random)")
    fit.add_argument("--draws", type=_non_negative, default=DRAWS, metavar="N",
                     help=f"random tie orders tried besides the first-node one (default {DRAWS}; 0: one placement)")
    fit.set_defaults(run=_fit)

    propose = commands.add_parser("propose", help="propose the cheapest pools for the declared workloads",
                                  description="Check the inventory, then find the cheapest machine counts, machine "
                                              "models and MIG layouts per pool that place every workload with N-1 "
                                              "headroom (a MILP solved by HiGHS, verified by fit), beside today's "
                                              "plan. Exit 1 when there is no such proposal.")
    propose.add_argument("inventory", metavar="INVENTORY", help="inventory folder, e.g. inventories/example")
    propose.add_argument("--json", action="store_true",
                         help="print the proposal as JSON on stdout (the findings as JSON when there are errors)")
    propose.set_defaults(run=_propose)

    render = commands.add_parser(
        "render", help="write the cluster layer's objects and Helm releases, validated",
        description="Check the inventory, build every object and Helm release the Pulumi program declares, "
                    "validate them offline (OpenAPI schemas of the spec's Kubernetes version, strict; the "
                    "project's own checks; CRD schemas) and write them as YAML. Nothing is written on errors.")
    render.add_argument("inventory", metavar="INVENTORY", help="inventory folder, e.g. inventories/example")
    render.add_argument("--out", metavar="DIR", type=Path,
                        help="output folder, replaced whole (default: build/render/<environment>)")
    render.set_defaults(run=_render, json=False)

    hostvars = commands.add_parser(
        "hostvars", help="print each host's derived settings for the playbooks, as JSON",
        description="Check the inventory, then print what the host layer applies to each node host (sysctls, "
                    "conntrack, hugepages, the whole KubeletConfiguration, node labels, driver, mig-parted "
                    "selection) as JSON on stdout. The playbooks' preflight play reads it; findings go to stderr.")
    hostvars.add_argument("inventory", metavar="INVENTORY", help="inventory folder, e.g. inventories/sandbox")
    hostvars.add_argument("--host", metavar="NAME", help="one host's settings only")
    hostvars.set_defaults(run=_hostvars, json=False)

    scheduler = commands.add_parser(
        "scheduler", help="print the kube-scheduler configuration fit simulates",
        description="Check the inventory, then print the KubeSchedulerConfiguration fit simulates and the cluster "
                    "must run: the one group_vars/all.yml declares with Kubespray's kube_scheduler_profiles, or "
                    "the project's bin-packing profile. Give it to kube-scheduler with --config; with --kubespray "
                    "it is printed as the Kubespray variables to add to group_vars/all.yml.")
    scheduler.add_argument("inventory", metavar="INVENTORY", help="inventory folder, e.g. inventories/sandbox")
    scheduler.add_argument("--kubespray", action="store_true",
                           help="print kube_scheduler_profiles and kube_scheduler_config_extra_opts instead")
    scheduler.set_defaults(run=_scheduler, json=False)

    run = commands.add_parser("run", help="run the main job's stages with progress",
                              description="The main job: check, plan, fit and render, then with --hosts the host "
                                          "layer on sandbox hosts and with --real-cluster the cluster layer on a "
                                          "local control plane; each stage timed; the first stage that fails stops "
                                          "the job, and whatever was started is cleaned up.")
    run.add_argument("inventory", metavar="INVENTORY", help="inventory folder, e.g. inventories/example")
    run.add_argument("--hosts", action="store_true",
                     help="then the host stages on sandbox hosts, one per inventory host: start them, bootstrap "
                          "(site.yml), verify (a second run changes nothing), report, remove them")
    run.add_argument("--keep-hosts", action="store_true",
                     help="with --hosts: keep the hosts running afterwards, so a re-run is warm")
    run.add_argument("--real-cluster", action="store_true",
                     help="then apply the inventory's stack with the real Pulumi CLI to a local control plane, "
                          "run the probes and tear down (needs ./dev.sh tools; infra/live/stages.py)")
    run.add_argument("--all", action="store_true",
                     help="the whole pipeline: --hosts and --real-cluster (what ./dev.sh run does on the sandbox)")
    run.set_defaults(run=_run, json=False)

    rules = commands.add_parser("rules", help="list every preflight rule",
                                description="List every rule with its code, severity, guard and fix.")
    rules.add_argument("--markdown", action="store_true", help="print the README's table of checks")
    rules.set_defaults(run=_rules)
    return parser


def _load(args: argparse.Namespace, out: TextIO) -> Environment | None:
    try:
        return load_environment(args.inventory)
    except SpecError as error:
        if args.json:
            print(json.dumps({"inventory": args.inventory, "unusable": error.problems}, indent=2))
        else:
            for problem in error.problems:
                print(f"error: {problem}", file=out)
            print(f"{args.inventory}: unusable input ({len(error.problems)} problem(s)); nothing was checked",
                  file=out)
        return None


def _print_findings(findings: list[Finding], out: TextIO) -> None:
    for finding in findings:
        print(f"{finding.severity.upper():7} {finding.code}  {finding.file}: {finding.field}\n"
              f"        {finding.message}\n        fix: {finding.fix}", file=out)


def _summary(findings: list[Finding]) -> str:
    errors = sum(f.severity == "error" for f in findings)
    return f"{errors} error(s), {len(findings) - errors} warning(s)"


def _findings_json(inventory: str, findings: list[Finding]) -> str:
    return json.dumps({
        "inventory": inventory,
        "errors": sum(f.severity == "error" for f in findings),
        "warnings": sum(f.severity == "warning" for f in findings),
        "findings": [f.as_dict() for f in findings],
    }, indent=2)


def _check(args: argparse.Namespace) -> int:
    env = _load(args, sys.stdout)
    if env is None:
        return EXIT_UNUSABLE
    findings = run_checks(env)
    summary = f"{args.inventory}: {len(env.hosts)} hosts in {len(env.pools)} pools: {_summary(findings)}"
    if args.json:
        print(_findings_json(args.inventory, findings))
        print(summary, file=sys.stderr)
    else:
        _print_findings(findings, sys.stdout)
        print(summary)
    return EXIT_ERRORS if has_errors(findings) else EXIT_OK


def _checked(args: argparse.Namespace, doing: str, tolerated: frozenset[str] = frozenset()) -> Environment | int:
    """Load and check the inventory for a command that needs a clean spec (but for the `tolerated` codes);
    the exit code when it is not."""
    env = _load(args, sys.stderr)
    if env is None:
        return EXIT_UNUSABLE
    findings = run_checks(env)
    if has_errors([finding for finding in findings if finding.code not in tolerated]):
        if args.json:
            print(_findings_json(args.inventory, findings))
        else:
            _print_findings(findings, sys.stderr)
        print(f"{args.inventory}: {_summary(findings)}; fix them before {doing}", file=sys.stderr)
        return EXIT_ERRORS
    if not args.json:
        _print_findings(findings, sys.stderr)
    return env


def _plan(args: argparse.Namespace) -> int:
    env = _checked(args, "planning")
    if isinstance(env, int):
        return env
    plan = build_plan(env)
    print(json.dumps(plan, indent=2) if args.json else render_table(plan))
    return EXIT_OK


def _render_stage(env: Environment, out: Path | None) -> bool:
    """Render and validate; print per concern what was written, or every problem; True when written."""
    result = render(env)
    if result.problems:
        for problem in result.problems:
            print(f"INVALID {problem}")
        print(f"{len(result.problems)} object problem(s); nothing was written")
        return False
    target = out or Path("build") / "render" / env.name
    try:
        write(result, target)
    except RenderError as error:
        print(f"error: {error}")
        return False
    for concern in result.concerns:
        print(f"  {concern.name:11} {len(concern.objects):5} objects  {len(concern.releases)} Helm releases"
              + (f"  files: {', '.join(sorted(concern.files))}" if concern.files else ""))
    print(f"{result.objects} objects and {result.releases} Helm releases valid for Kubernetes "
          f"{env.cluster.kube_version}, written to {target}/")
    return True


def _render(args: argparse.Namespace) -> int:
    env = _checked(args, "rendering")
    if isinstance(env, int):
        return env
    return EXIT_OK if _render_stage(env, args.out) else EXIT_ERRORS


NO_WORKLOADS = "no workloads declared (group_vars/all: workloads, see README 'Workloads: fit and propose')"


def _fit(args: argparse.Namespace) -> int:
    env = _checked(args, "fitting")
    if isinstance(env, int):
        return env
    if not env.workloads:
        print(json.dumps({"environment": env.name, "workloads": [], "fits": True}, indent=2) if args.json
              else f"{args.inventory}: {NO_WORKLOADS}; nothing to place")
        return EXIT_OK
    data = fit(env, draws=args.draws)
    print(json.dumps(data, indent=2) if args.json else render_fit(data))
    failed = (not data["fits"] or (args.require_n_1 and not data["n_minus_1_ok"])
              or (args.require_guaranteed and not data["guaranteed"]))
    return EXIT_ERRORS if failed else EXIT_OK


def _propose(args: argparse.Namespace) -> int:
    from infra.planning import propose  # imports the solver (HiGHS, numpy): only this command needs them

    env = _checked(args, "proposing", propose.FIXABLE)
    if isinstance(env, int):
        return env
    if not env.workloads:
        print(json.dumps({"environment": env.name, "problem": NO_WORKLOADS}, indent=2) if args.json
              else f"{args.inventory}: {NO_WORKLOADS}; nothing to size")
        return EXIT_OK
    data = propose.report(env, propose.propose(env))
    print(json.dumps(data, indent=2) if args.json else propose.render(data))
    return EXIT_ERRORS if "problem" in data else EXIT_OK


def _hostvars(args: argparse.Namespace) -> int:
    env = _checked(args, "preparing hosts")
    if isinstance(env, int):
        return env
    data = environment_host_vars(env)
    if args.host is not None:
        if args.host not in data["hosts"]:
            print(f"{args.inventory}: no node host {args.host!r}; node hosts: {', '.join(data['hosts'])}",
                  file=sys.stderr)
            return EXIT_UNUSABLE
        data = data["hosts"][args.host]
    print(json.dumps(data, indent=2))
    return EXIT_OK


def _scheduler(args: argparse.Namespace) -> int:
    env = _checked(args, "configuring the scheduler")
    if isinstance(env, int):
        return env
    config = scheduler_configuration_of(resolve(env))
    print(yaml.safe_dump(kubespray_variables(config) if args.kubespray else config, sort_keys=False), end="")
    return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    """The main job, stage by stage; each later issue adds its stage here."""
    env: Environment | None = None
    findings: list[Finding] = []

    def check() -> bool:
        nonlocal env, findings
        env = _load(args, sys.stdout)
        if env is None:
            return False
        findings = run_checks(env)
        _print_findings(findings, sys.stdout)
        print(f"{len(env.hosts)} hosts in {len(env.pools)} pools: {_summary(findings)}")
        return not has_errors(findings)

    def plan() -> bool:
        assert env is not None
        print(render_table(build_plan(env)))
        return True

    def place() -> bool:
        assert env is not None
        if not env.workloads:
            print(f"{NO_WORKLOADS}; nothing to place")
            return True
        data = fit(env)
        print(render_fit(data))
        return bool(data["fits"])

    def render_() -> bool:
        assert env is not None
        return _render_stage(env, None)

    stages: list[tuple[str, Callable[[], bool]]] = [
        ("check", check), ("plan", plan), ("fit", place), ("render", render_)]
    finally_: list[tuple[str, Callable[[], bool]]] = []  # run even after a failed stage
    if args.hosts or args.all:
        hosts = HostStages(Path(args.inventory), keep_hosts=args.keep_hosts)
        stages += [(name, _said(stage)) for name, stage in hosts.stages()]
        finally_.append(("clean up hosts", _said(hosts.cleanup)))
    if args.real_cluster or args.all:
        from infra.live.stages import main_job_stages  # imports the cluster layer: only when asked

        real, cleanup = main_job_stages(args.inventory)
        stages += real

        def clean_cluster() -> bool:  # a no-op when the teardown stage ran
            cleanup()
            return True

        finally_.append(("clean up the cluster", clean_cluster))
    started = time.perf_counter()
    total, failed = len(stages) + len(finally_), False
    for number, (name, stage) in enumerate(stages + finally_, 1):
        if failed and number <= len(stages):
            continue
        print(f"==> [{number}/{total}] {name} {args.inventory}", flush=True)
        began = time.perf_counter()
        ok = stage()
        print(f"<== {name} {'done' if ok else 'FAILED'} in {time.perf_counter() - began:.2f} s\n", flush=True)
        failed = failed or not ok
        if failed and env is None:
            return EXIT_UNUSABLE
    if failed:
        return EXIT_ERRORS
    print(f"main job done: {total} stages in {time.perf_counter() - started:.2f} s")
    return EXIT_OK


def _said(stage: Callable[[], StageResult]) -> Callable[[], bool]:
    """A host stage as the main job runs it: its one-line summary printed, its success returned."""
    def run() -> bool:
        result = stage()
        print(result.summary, flush=True)
        return result.ok
    return run


def _rules(args: argparse.Namespace) -> int:
    print(rules_markdown() if args.markdown else "\n".join(
        f"{rule.code:30} {rule.severity:7} {rule.guards}\n{'':38} fix: {rule.fix}" for rule in _sorted_rules()
    ))
    return EXIT_OK


def rules_markdown() -> str:
    lines = ["| code | severity | guards against | fix |", "|---|---|---|---|"]
    lines += [f"| `{r.code}` | {r.severity} | {r.guards} | {r.fix} |" for r in _sorted_rules()]
    return "\n".join(lines)


def _sorted_rules() -> list[Rule]:
    return sorted(RULES.values(), key=lambda rule: rule.code)

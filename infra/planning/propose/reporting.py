"""The proposal beside today's plan: as plain data (`--json`) and as a table for a terminal.
"""

from __future__ import annotations

from typing import Any

from infra.model.capacity import pool_capacity
from infra.model.resolve import resolve
from infra.planning.fit import fit
from infra.planning.propose.candidates import Layout, current_layout
from infra.planning.propose.program import highspy_version
from infra.planning.propose.search import Proposal
from infra.spec import Environment


def _layout_text(layout: Layout | None) -> str:
    if layout is None:
        return ""
    return "+".join(profile if count == 1 else f"{count}x{profile}" for profile, count in
                    sorted(layout, key=lambda item: (-int(item[0].split("g.")[0]), item[0])))


def report(env: Environment, proposal: Proposal | str) -> dict[str, Any]:
    """The proposal beside today's plan, as plain data (the JSON output)."""
    view = resolve(env)
    today = fit(env)
    replicas = today["replicas"]
    pools = []
    current_total = proposed_total = 0.0
    current_hosts = proposed_hosts = 0
    for name, pool in env.pools.items():
        monthly = float(pool_capacity(view, pool).monthly_cost)
        today_pool = next(p for p in today["pools"] if p["name"] == name)
        entry: dict[str, Any] = {"name": name, "current": {
            "machine": pool.vars.machine, "hosts": len(pool.hosts), "mig_layout": _layout_text(current_layout(pool)),
            "monthly_cost": monthly, "n_minus_1_ok": today_pool.get("n_minus_1", {}).get("ok"),
            "percent": today_pool["percent"]}}
        current_total += monthly
        current_hosts += len(pool.hosts)
        if isinstance(proposal, Proposal):
            if name in proposal.choice:
                candidate, hosts = proposal.choice[name]
                after = next(p for p in proposal.fit["pools"] if p["name"] == name)
                entry["proposed"] = {"machine": candidate.machine, "hosts": hosts,
                                     "mig_layout": _layout_text(candidate.layout),
                                     "mig_config": proposal.env.pools[name].vars.sharing.mig_config,
                                     "monthly_cost": candidate.price * hosts,
                                     "n_minus_1_ok": after.get("n_minus_1", {}).get("ok"),
                                     "requested": after["requested"], "allocatable": after["allocatable"],
                                     "percent": after["percent"]}
            else:
                entry["proposed"] = {**entry["current"], "kept": True}
            proposed_total += entry["proposed"]["monthly_cost"]
            proposed_hosts += entry["proposed"]["hosts"]
            entry["changes"] = _changes(entry["current"], entry["proposed"])
        pools.append(entry)
    data: dict[str, Any] = {
        "environment": env.name, "currency": env.cluster.currency, "replicas": replicas,
        "refused_by_quota": today["refused"],
        "current": {"hosts": current_hosts, "monthly_cost": round(current_total, 2), "fits": today["fits"],
                    "n_minus_1_ok": today["n_minus_1_ok"]},
        "pools": pools,
    }
    if isinstance(proposal, str):
        data["problem"] = proposal
        return data
    data["proposed"] = {"hosts": proposed_hosts, "monthly_cost": round(proposed_total, 2),
                        "placed": proposal.fit["placed"], "n_minus_1_ok": proposal.fit["n_minus_1_ok"]}
    data["solver"] = {"name": "HiGHS", "version": highspy_version(), "kind": "MILP", "status": proposal.status,
                      "variables": proposal.variables, "constraints": proposal.constraints,
                      "rounds": proposal.rounds, "seconds": round(proposal.seconds, 2)}
    data["warnings"] = [f"{f.code} {f.field}: {f.message}" for f in proposal.findings]
    return data


def _changes(current: dict[str, Any], proposed: dict[str, Any]) -> list[str]:
    if proposed.get("kept"):
        return []
    found = []
    if proposed["machine"] != current["machine"]:
        found.append(f"machine {current['machine']} -> {proposed['machine']}")
    if proposed["hosts"] != current["hosts"]:
        difference = proposed["hosts"] - current["hosts"]
        found.append(f"{difference:+d} host{'s' if abs(difference) != 1 else ''}")
    if proposed["mig_layout"] != current["mig_layout"]:
        found.append(f"MIG {current['mig_layout']} -> {proposed['mig_layout']} ({proposed['mig_config']})")
    return found


def render(data: dict[str, Any]) -> str:
    """The proposal for a terminal: per pool today -> proposed, the totals, the solver's figures."""
    money = data["currency"]
    current = data["current"]
    if "problem" in data:
        return f"No proposal for {data['environment']}: {data['problem']}."
    proposed = data["proposed"]
    difference = proposed["monthly_cost"] - current["monthly_cost"]
    lines = [f"Proposal for {data['environment']}: {proposed['placed']} replicas placed with N-1 headroom in every "
             f"sized pool, {money} {proposed['monthly_cost']:,.0f} a month (today {current['monthly_cost']:,.0f}: "
             f"{difference:+,.0f})", ""]
    header = ["POOL", "MACHINE", "HOSTS", "MIG LAYOUT PER CARD", f"{money}/MONTH", "N-1", "CHANGES"]
    rows = []
    for pool in data["pools"]:
        before, after = pool["current"], pool["proposed"]
        rows.append([pool["name"], _pair(pool, "machine", "{}"), _pair(pool, "hosts", "{}"),
                     _pair(pool, "mig_layout", "{}"), _pair(pool, "monthly_cost", "{:,.0f}"),
                     _n1(before["n_minus_1_ok"]) if after.get("kept") else
                     f"{_n1(before['n_minus_1_ok'])} -> {_n1(after['n_minus_1_ok'])}",
                     "kept: no workload runs there" if after.get("kept") else ", ".join(pool["changes"]) or "-"])
    rows.append(["total", "", f"{current['hosts']} -> {proposed['hosts']}", "",
                 f"{current['monthly_cost']:,.0f} -> {proposed['monthly_cost']:,.0f}", "", ""])
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()

    separator = "  ".join("-" * width for width in widths)
    lines += [line(header), separator, *(line(row) for row in rows[:-1]), separator, line(rows[-1])]
    lines += ["", "Requested / allocatable after placement, today -> proposed:"]
    for pool in data["pools"]:
        before, after = pool["current"]["percent"], pool["proposed"]["percent"]
        shown = [f"{name.rsplit('/', 1)[-1]} {before.get(name, 0):.0f}% -> {after.get(name, 0):.0f}%"
                 for name in after if name != "pods"]
        lines.append(f"  {pool['name']}: {', '.join(shown)}")
    solver = data["solver"]
    lines += ["", f"Solver: {solver['name']} {solver['version']} ({solver['kind']}, {solver['variables']} variables, "
                  f"{solver['constraints']} constraints): {solver['status'].lower()}, gap 0; verified by fit with N-1 "
                  f"in {solver['rounds']} round(s); {solver['seconds']:.2f} s."]
    if data["refused_by_quota"]:
        lines.append(f"{data['refused_by_quota']} replicas are refused by quota whatever the pools (see fit); "
                     "they are not sized for.")
    lines += [f"Warning: {warning}" for warning in data["warnings"]]
    return "\n".join(lines)


def _pair(pool: dict[str, Any], key: str, form: str) -> str:
    """"value" when the proposal keeps it, "before -> after" when it changes."""
    before, after = pool["current"][key], pool["proposed"][key]
    return form.format(after) if before == after else f"{form.format(before)} -> {form.format(after)}"


def _n1(ok: bool | None) -> str:
    return "-" if ok is None else "ok" if ok else "fails"

"""Writes the reliability figures (crash runs, soak) into docs/performance.md and
docs/reliability.md.

``python -m bench.reliability_report`` after ``bench.crash`` and ``bench.soak`` runs: it
reads ``bench/results/crash-<db>.json`` and ``bench/results/soak.json`` (whichever exist)
and replaces the text between the ``<!-- reliability:figures -->``, ``<!-- crash:figures
-->`` and ``<!-- soak:figures -->`` markers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench" / "results"


def _load(name: str) -> dict | None:
    path = BENCH / name
    return json.loads(path.read_text()) if path.exists() else None


def crash_rows() -> list[str]:
    rows = []
    for db in ("sqlite", "postgresql"):
        report = _load(f"crash-{db}.json")
        if report is None:
            continue
        points = report["points"]
        named = [p for p in points if p != "random"]
        reached = sum(points[p]["reached"] for p in named)
        tried = sum(points[p]["tried"] for p in named)
        ready, caught = report["ready_seconds"], report["caught_up_seconds"]
        rows.append(
            f"| {db} | {report['kills']} | {report['survived']} | {tried} tried, {reached} "
            f"reached, {sum(1 for p in named if points[p]['tried'])} of {len(named)} points; "
            f"{points['random']['tried']} random | {ready.get('median', '-')} / "
            f"{ready.get('max', '-')} s | {caught.get('median', '-')} / {caught.get('max', '-')} s "
            f"| {report['tuples_acknowledged']} | {len(report['violations'])} |"
        )
    return rows


def crash_table() -> str:
    rows = crash_rows()
    if not rows:
        return "No crash run recorded yet."
    return "\n".join(
        [
            "| catalog | kills | survived | crash points | kill to ready (median / max) "
            "| kill to caught up (median / max) | tuples acknowledged | violations |",
            "|---|---:|---:|---|---:|---:|---:|---:|",
            *rows,
            "",
            "One run per catalog, `bench/results/crash-<db>.json` (a violation is a lost, "
            "duplicated or leaked row, or a harness error).",
        ]
    )


def crash_points() -> str:
    lines = []
    for db in ("sqlite", "postgresql"):
        report = _load(f"crash-{db}.json")
        if report is None:
            continue
        slow = report.get("slow_catch_ups", 0)
        deferred = f"; {slow} catch-ups slower than 180 s, checked after a later restart"
        lines.append(
            f"{db} (seed {report['seed']}, {report['seconds']:.0f} s{deferred if slow else ''}):\n"
        )
        lines.append("| point | tried | reached | survived |")
        lines.append("|---|---:|---:|---:|")
        for point, counts in report["points"].items():
            lines.append(
                f"| `{point}` | {counts['tried']} | {counts['reached']} | {counts['survived']} |"
            )
        lines.append("")
    return "\n".join(lines) or "No crash run recorded yet."


def soak_text() -> str:
    report = _load("soak.json")
    if report is None:
        return "No soak run recorded yet."
    shape, latency, revocation = (
        report["shape"],
        report["latency_seconds"],
        report["revocation_seconds"],
    )
    resources = report["resources"]
    growth = ", ".join(
        f"{key} {values['first']} -> max {values['max']} (growth after warm-up "
        f"{values['growth_after_warm_up']})"
        for key, values in resources.items()
    )
    return (
        f"`python -m bench.soak --seconds {shape['seconds']:g}`: {shape['providers']} providers, "
        f"{shape['queries']} queries, {shape['subscribers']} subscribers: "
        f"{report['tuples_per_second']} tuples/s acknowledged "
        f"({report['tuples_acknowledged']} in all), {report['rows_delivered']} rows delivered; "
        f"ingest-to-subscriber latency p50 {latency.get('p50', '-')} s, p99 "
        f"{latency.get('p99', '-')} s; revocation to `closed` p50 {revocation.get('p50', '-')} s, "
        f"max {revocation.get('max', '-')} s over {revocation.get('count', 0)} revocations; "
        f"{growth}; {len(report['errors'])} errors{_load_text(report)}.\n\n"
        "![soak resources](img/soak-resources.png)"
    )


def _load_text(report: dict) -> str:
    """The 1-minute load average over the run (the machine is shared: figures are noisy)."""
    load = report.get("load_average") or {}
    if not load:
        return ""
    return f"; load average (1 min) p50 {load['p50']}, max {load['max']}"


def _replace(path: Path, marker: str, text: str) -> None:
    content = path.read_text()
    pattern = re.compile(rf"(<!-- {marker} -->\n).*?(<!-- /{marker} -->)", re.S)
    path.write_text(pattern.sub(lambda m: m.group(1) + text + "\n" + m.group(2), content))


def main() -> None:
    performance, doc = ROOT / "docs" / "performance.md", ROOT / "docs" / "reliability.md"
    _replace(performance, "reliability:figures", crash_table() + "\n\n" + soak_text())
    _replace(doc, "crash:figures", crash_table() + "\n\n" + crash_points())
    _replace(doc, "soak:figures", soak_text())


if __name__ == "__main__":
    main()

"""Secure ingest's driver work per sp, in pure Python (no JVM): before and after.

    python -m bench.ingest_driver --config 10000x1x64 --reps 3

Replays what the ingest driver does with one batch's collected sps and declarations
(``bench.workload``'s landing, sps as Spark's ``to_json`` writes them): read each sp,
find the gaps, replay the reference tracker and compile each policy (``decide``),
record the new policies (``registry``) and build the decision table's Arrow columns.
Arms, interleaved (the order rotates every repetition), each on a fresh ``Ingest``:
``before``: the general validator on Spark's JSON, the collector running; ``after``:
``wire.sp_of_columns`` on the sps' typed columns (as ``Ingest._collect`` reads
them) under ``gc_paused``; ``after, same bodies again``: a second batch of the same policy
bodies on the same ``Ingest`` (policies compiled by content id are reused). Prints the
median microseconds per sp of each step and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from bench.workload import STREAM, hierarchy, write_landing
from streamshield.engine.frames import local_frames
from streamshield.engine.gc_pause import gc_paused
from streamshield.engine.ingest import ingest as ingest_module
from streamshield.engine.ingest.ingest import SP_FIELDS, Ingest, gap_summaries
from streamshield.engine.ingest.policy_registry import PolicyRegistry
from streamshield.lang import wire
from streamshield.policy.elements import Channel, SpElement
from streamshield.policy.punctuation import SecurityPunctuation


def batch(n: int, per_sp: int, roles: int) -> tuple[list[tuple], list[dict]]:
    """The sps (channel, seq, Spark's JSON) and declaration summaries of one landing."""
    root = Path(tempfile.mkdtemp(prefix="ingest-driver-"))
    write_landing(root, n, per_sp, roles)
    lines = [
        json.loads(line)
        for path in sorted((root / STREAM.name).glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    sps, spans = [], {}
    for d in lines:
        if d["type"] == "sp":
            fields = {k: d[k] for k in SP_FIELDS if k in d}  # Spark's field order
            text = json.dumps(fields, separators=(",", ":"))
            ddp, srp = d["ddp"], d["srp"]
            columns = (
                *(d[k] for k in ("stream", "provider", "seq", "ts", "sn")),
                *(ddp[k] for k in ("streams", "tuples", "attributes")),
                *(srp.get(k) for k in ("roles", "grant_option", "privilege")),
                d["sign"],
                d["immutable"],
            )
            sps.append((Channel(d["stream"], d["provider"]), d["seq"], text, columns))
        else:
            key = (d["stream"], d["provider"], d["policy"]["ts"], d["policy"]["csn"])
            first, last = spans.get(key, (d["seq"], d["seq"]))
            spans[key] = (min(first, d["seq"]), max(last, d["seq"]))
    declared = [
        {"stream": s, "provider": p, "p_ts": ts, "p_csn": csn, "first": f, "last": last}
        for (s, p, ts, csn), (f, last) in spans.items()
    ]
    return sps, declared


def one_batch(ingest: Ingest, sps: list, declared: list, read) -> dict[str, float]:
    """Seconds per step for one batch, the way ``Ingest._collect`` and ``_decide`` go."""
    began = time.perf_counter()
    by_channel: dict[Channel, list] = {}
    for channel, seq, text, columns in sps:
        by_channel.setdefault(channel, []).append((seq, read(text, columns)))
    ordered = {c: sorted(items, key=lambda x: x[0]) for c, items in by_channel.items()}
    seqs = {c: [seq for seq, _ in items] for c, items in ordered.items()}
    summaries, _ = gap_summaries(seqs, declared)
    read_s = time.perf_counter()
    decisions, policies = ingest._decide(ordered, summaries, {})
    decide_s = time.perf_counter()
    assert ingest.registry is not None
    ingest.registry.save(ingest._in_force.values())
    ingest._in_force.clear()
    registry_s = time.perf_counter()
    rows = ingest_module._decision_rows(decisions, policies, ordered)
    for i, field in enumerate(ingest_module._DECISIONS.fields):
        scalar = type(field.dataType) in local_frames._SCALARS
        values = [r[i] if scalar else local_frames.as_python(r[i], field.dataType) for r in rows]
        pa.array(values, type=local_frames.arrow_type(field.dataType))
    arrow_s = time.perf_counter()
    assert all(sp is not None for items in ordered.values() for _, sp in items)
    return {
        "read sps": read_s - began,
        "decide": decide_s - read_s,
        "registry": registry_s - decide_s,
        "decision rows (Arrow)": arrow_s - registry_s,
    }


def run(arm: str, sps: list, declared: list, roles: int) -> dict[str, float]:
    ingest = Ingest(None, hierarchy(roles), {STREAM.name: STREAM})  # type: ignore[arg-type]
    ingest.registry = PolicyRegistry(tempfile.mkdtemp(prefix="ingest-driver-registry-"))
    if arm == "before":
        return one_batch(ingest, sps, declared, _validated)
    with gc_paused():
        first = one_batch(ingest, sps, declared, _columns)
    if arm == "after":
        return first
    with gc_paused():
        return one_batch(ingest, sps, declared, _columns)


def _validated(text: str, columns: tuple) -> SecurityPunctuation | None:
    try:
        element = wire.parse_element(text)
    except wire.WireFormatError:
        return None
    return element.sp if isinstance(element, SpElement) else None


def _columns(text: str, columns: tuple) -> SecurityPunctuation | None:
    return wire.sp_of_columns(*columns)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", default="10000x1x64", help="tuples x tuples per sp x roles")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    n, per_sp, roles = (int(x) for x in args.config.split("x"))
    sps, declared = batch(n, per_sp, roles)
    arms = ["before", "after", "after, same bodies again"]
    spent: dict[str, list[dict[str, float]]] = {arm: [] for arm in arms}
    for arm in arms:  # warm-up, not reported (imports, first Arrow arrays, caches)
        run(arm, sps[:500], declared, roles)
    print("load before", os.getloadavg(), flush=True)
    for i in range(args.reps):
        for arm in arms[i % 3 :] + arms[: i % 3]:
            spent[arm].append(run(arm, sps, declared, roles))
    for arm, runs in spent.items():
        per_sp_us = {
            step: round(statistics.median(r[step] for r in runs) * 1e6 / len(sps), 1)
            for step in runs[0]
        }
        total = round(statistics.median(sum(r.values()) for r in runs) * 1e6 / len(sps), 1)
        print(f"{arm}: {per_sp_us} total {total} us per sp ({len(sps)} sps)", flush=True)
    print("load after", os.getloadavg(), flush=True)


if __name__ == "__main__":
    main()

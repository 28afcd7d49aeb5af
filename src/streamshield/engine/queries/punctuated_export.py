"""Export a query's labelled output as a punctuated stream (paper 1, section 5.3).

Each output channel (one per origin channel, named by its salted hash) carries, before
the first surviving tuple of every policy segment, that policy's sps exactly once; a
segment none of whose tuples survived emits nothing. Sps are re-stamped with output
timestamps that only grow, so a downstream Security Shield accepts each segment's
policy even when an origin policy comes back.

This is a sink: it runs once per micro-batch on the driver over rows already filtered
and masked by the secured view. Its own state (per output channel: current policy,
timestamp, next seq) is versioned per batch like the ingest's, so a replayed batch
rewrites the same file.

Only outputs whose columns are origin attributes under their own names can be exported,
since sps name attributes; and a tuple whose id is masked is withheld when its policy
scopes any sp by tuple id (the downstream shield could not apply it).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pyspark.sql import DataFrame

from streamshield.durable import write_atomic
from streamshield.engine.ingest.policy_registry import PolicyRegistry
from streamshield.engine.store.snapshots import Snapshots
from streamshield.lang.wire import to_line
from streamshield.policy.elements import Channel, SpElement, TupleElement
from streamshield.policy.policy import Policy
from streamshield.policy.sp_patterns import Any

ORIGIN = ("_ss_policy", "_ss_channel", "_ss_seq", "_ss_tid")


class PunctuatedExport:
    """A ``CallbackSink`` function writing ``<out>/b<batch>.jsonl`` in the wire format."""

    def __init__(self, out: str | Path, registry: PolicyRegistry, stream: str, origin: str) -> None:
        self.out = Path(out)
        self.origin = origin
        self.out.mkdir(parents=True, exist_ok=True)
        self.state = Snapshots(self.out / "_state")
        self.registry, self.stream = registry, stream
        self.withheld = 0

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        state = self.state.start_of(batch_id, {})
        columns = [c for c in frame.columns if not c.startswith("_ss_")]
        lines: list[str] = []
        for row in frame.orderBy("_ss_channel", "_ss_seq").collect():
            lines += self._emit(row.asDict(), columns, state)
        write_atomic(self.out / f"b{batch_id:012d}.jsonl", "".join(f"{x}\n" for x in lines))
        self.state.save(batch_id, state)

    def _emit(self, row: dict, columns: list[str], state: dict) -> list[str]:
        policy = self.registry.load(row["_ss_policy"])
        tid = row["_ss_tid"]
        if tid is None and any(not isinstance(sp.ddp.tuples, Any) for sp in policy.sps):
            self.withheld += 1
            return []
        key = row["_ss_channel"]
        channel = Channel(self.stream, key[:16])
        current = state.setdefault(key, {"policy": None, "ts": 0, "seq": 0})
        lines = []
        if current["policy"] != row["_ss_policy"]:
            current.update(policy=row["_ss_policy"], ts=current["ts"] + 1)
            for sp in _for_output(policy, self.origin, current["ts"]).sps:
                current["seq"] += 1
                lines.append(to_line(SpElement(channel, current["seq"], sp)))
        current["seq"] += 1
        values = {c: row[c] for c in columns}
        element = TupleElement(
            channel,
            current["seq"],
            "" if tid is None else tid,
            current["ts"],
            _for_output(policy, self.origin, current["ts"]).csn,
            values,
        )
        lines.append(to_line(element))
        return lines


def _for_output(policy: Policy, origin: str, ts: int) -> Policy:
    """The sps that applied to the origin stream, re-stamped and re-numbered for the output
    channel, whose stream scope becomes the channel itself."""
    kept = [sp for sp in policy.sps if sp.ddp.streams.matches(origin)]
    return Policy.of(
        replace(sp, ddp=replace(sp.ddp, streams=Any()), ts=ts, sn=sn)
        for sn, sp in enumerate(kept, start=1)
    )

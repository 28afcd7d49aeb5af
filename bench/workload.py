"""Generated workloads for the benchmarks: one stream, many providers, sps every k tuples."""

from __future__ import annotations

import random
from pathlib import Path

from streamshield.catalog.streams import StreamDefinition
from streamshield.lang.wire import to_line
from streamshield.policy.elements import Channel, SpElement, TupleElement
from streamshield.policy.patterns import ANY, Literal, OneOf, Range
from streamshield.policy.punctuation import (
    DataDescription,
    SecurityPunctuation,
    SecurityRestriction,
)
from streamshield.policy.roles import RoleHierarchy

STREAM = StreamDefinition(
    "Readings", (("id", "bigint"), ("value", "double"), ("ts", "bigint")), "id", "ts"
)


def hierarchy(n_roles: int) -> RoleHierarchy:
    return RoleHierarchy.build([f"r{i:03d}" for i in range(n_roles)])


def write_landing(
    root: Path,
    n_tuples: int,
    tuples_per_sp: int,
    n_roles: int,
    providers: int = 8,
    seed: int = 7,
    by_tuple_id: bool = False,
) -> Path:
    """JSON-lines landing files; each provider's policy is re-sent every ``tuples_per_sp``.

    Policies grant 1-8 random roles on the whole stream, or with ``by_tuple_id`` on a
    tuple-id range (covering every tuple), which makes every tuple evaluate the rules.
    """
    rng = random.Random(seed)
    roles = [f"r{i:03d}" for i in range(n_roles)]
    folder = root / STREAM.name
    folder.mkdir(parents=True, exist_ok=True)
    per_provider = n_tuples // providers
    for p in range(providers):
        channel = Channel(STREAM.name, f"p{p}")
        lines, seq, ts = [], 0, 0
        for i in range(per_provider):
            if i % tuples_per_sp == 0:
                ts += 1
                granted = rng.sample(roles, k=max(1, min(len(roles), rng.randint(1, 8))))
                pattern = (
                    Literal(granted[0])
                    if len(granted) == 1
                    else OneOf(frozenset(Literal(r) for r in granted))
                )
                sp = SecurityPunctuation(
                    DataDescription(ANY, Range(0, 10**9) if by_tuple_id else ANY, ANY),
                    SecurityRestriction(pattern),
                    ts=ts,
                    sn=1,
                )
                seq += 1
                lines.append(to_line(SpElement(channel, seq, sp)))
            seq += 1
            values = {"id": i, "value": rng.random() * 100, "ts": i}
            lines.append(to_line(TupleElement(channel, seq, i, ts, 1, values)))
        (folder / f"p{p}-000000000001-bench.jsonl").write_text("\n".join(lines) + "\n")
    return root

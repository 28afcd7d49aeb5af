"""Generated workloads for the benchmarks: one stream, many providers, sps every k tuples."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

from streamshield.catalog.streams import StreamDefinition
from streamshield.lang.wire import to_line
from streamshield.policy.elements import Channel, SpElement, TupleElement
from streamshield.policy.punctuation import (
    DataDescription,
    SecurityPunctuation,
    SecurityRestriction,
)
from streamshield.policy.roles import RoleHierarchy
from streamshield.policy.sp_patterns import ANY, Literal, OneOf, Range

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
    files: int = 1,
) -> Path:
    """JSON-lines landing files; each provider's policy is re-sent every ``tuples_per_sp``.

    Policies grant 1-8 random roles on the whole stream, or with ``by_tuple_id`` on a
    tuple-id range (covering every tuple), which makes every tuple evaluate the rules.
    ``files``: each provider's elements cut into that many consecutive files, the k-th
    files of all providers older than the (k+1)-th (read ``providers`` files a batch
    to get ``files`` batches of ``n_tuples / files`` tuples, in seq order).
    """
    rng = random.Random(seed)
    roles = [f"r{i:03d}" for i in range(n_roles)]
    folder = root / STREAM.name
    folder.mkdir(parents=True, exist_ok=True)
    per_provider = n_tuples // providers
    chunks = [[] for _ in range(files)]  # per file index: (path, lines) of every provider
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
                lines.append((seq, to_line(SpElement(channel, seq, sp))))
            seq += 1
            values = {"id": i, "value": rng.random() * 100, "ts": i}
            lines.append((seq, to_line(TupleElement(channel, seq, i, ts, 1, values))))
        cut = -(-len(lines) // files)
        for k in range(files):
            part = lines[k * cut : (k + 1) * cut]
            if part:
                name = f"p{p}-{part[0][0]:012d}-bench.jsonl"
                chunks[k].append((folder / name, "\n".join(text for _, text in part) + "\n"))
    now = time.time()
    for k, written in enumerate(chunks):
        for path, text in written:
            path.write_text(text)
            os.utime(path, (now - files + k, now - files + k))  # file k before file k + 1
    return root

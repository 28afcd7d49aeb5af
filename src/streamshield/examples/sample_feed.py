"""A small provider feed a new user can pipe into ``streamshield client ingest``.

The lines are plain rows in the wire format without ``seq`` (the server assigns seqs,
sp ``ts``/``sn`` and tuple policies per channel: ``?assign=seq``, which ``client ingest``
uses for lines without seq). First comes one sp granting the given roles every
attribute of the stream's tuples, then the readings, in the shape of the bundled
example's ``HeartRate`` stream (schema ``vitals``: patient_id bigint, beats_per_min
double, ts bigint seconds). The bundled ``sample_feed.jsonl`` is this generator's
default output.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence
from importlib import resources

DEFAULT_STREAM = "HeartRate"
DEFAULT_ROLES = ("C", "ND")
BUNDLED = "sample_feed.jsonl"
_START = 1_700_000_000  # event time of the first reading, epoch seconds


def sample_lines(
    stream: str = DEFAULT_STREAM,
    provider: str | None = None,
    rows: int = 20,
    roles: Sequence[str] = DEFAULT_ROLES,
    seed: int = 7,
) -> Iterator[str]:
    """The sp, then ``rows`` readings of ten patients; deterministic for a seed."""
    if rows < 0:
        raise ValueError("rows must be 0 or more")
    if not roles:
        raise ValueError("at least one role is needed")
    channel = {"stream": stream} | ({"provider": provider} if provider else {})
    sp = {
        "type": "sp",
        **channel,
        "ddp": {"streams": stream, "tuples": "*", "attributes": "*"},
        "srp": {"roles": "{" + ", ".join(roles) + "}", "grant_option": False},
        "sign": "+",
        "immutable": False,
    }
    yield json.dumps(sp)
    rng = random.Random(seed)
    for i in range(rows):
        values = {
            "patient_id": 120 + i % 10,
            "beats_per_min": round(rng.uniform(55.0, 130.0), 1),
            "ts": _START + i,
        }
        yield json.dumps({"type": "tuple", **channel, "values": values})


def bundled() -> str:
    """The bundled sample feed (package data)."""
    return resources.files("streamshield.examples").joinpath(BUNDLED).read_text("utf-8")

"""Events as the JSON files a Spark file source reads, and values made comparable
between Spark's rows and the oracle's (tests, the example, benches).

One file per event type and micro-batch (``<root>/<Type>/<number>.json``), event time in
ISO-8601 UTC: writing a batch's files and then ``processAllAvailable`` feeds exactly that
batch to a query over ``spark.readStream.json(<root>/<Type>)``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path

from streamshield.cep.oracle import EPOCH, Event


def write_batch(root: Path, number: int, events: Iterable[Event], types: Iterable[str]) -> None:
    events = list(events)
    for type_ in types:
        lines = [
            json.dumps({**e.values, "ts": e.ts.isoformat().replace("+00:00", "Z")})
            for e in events
            if e.type == type_
        ]
        if lines:
            (root / type_ / f"{number}.json").write_text("\n".join(lines) + "\n")


def comparable(value: object) -> object:
    """Timestamps as epoch microseconds (what ``unix_micros`` gives on the Spark side),
    floats rounded (averages): comparable on both sides."""
    if isinstance(value, datetime):
        return (value - EPOCH) // timedelta(microseconds=1)
    return round(value, 6) if isinstance(value, float) else value

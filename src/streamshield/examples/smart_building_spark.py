"""The smart-building example on Spark (``streamshield cep-example --spark``): every
accepted pattern of :mod:`streamshield.examples.smart_building` runs through its role's
protection engine in one streaming query, fed the example's two micro-batches; the rows
must be the oracle's."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import TimestampType

from streamshield.cep.event_files import comparable, write_batch
from streamshield.cep.pattern import compile_pattern
from streamshield.cep.spark_protection import compile_protected
from streamshield.cep.validation import PatternRefused
from streamshield.examples import smart_building as example

DDL = {
    "Temperature": "room string, celsius double, ts timestamp",
    "Smoke": "room string, level bigint, ts timestamp",
    "Door": "room string, person string, ts timestamp",
}


def compare(spark: SparkSession, root: Path) -> dict[str, tuple[Counter, Counter]]:
    """(Spark's rows, the oracle's rows) per accepted pattern."""
    for type_ in example.TYPES:
        (root / type_).mkdir(parents=True, exist_ok=True)
    sources = {t: spark.readStream.schema(DDL[t]).json(str(root / t)) for t in example.TYPES}
    union, expected = None, {}
    for role, name, text in example.PATTERNS:
        pattern = compile_pattern(text, example.TYPES)
        try:
            frame = compile_protected(
                pattern, example.ACCESS, example.HIERARCHY, {role}, sources, delay=example.DELAY
            )
        except PatternRefused:
            continue
        expected[name] = Counter(tuple(map(comparable, r)) for r in example.run_role(role, text))
        columns = [
            F.unix_micros(f.name).alias(f.name)
            if isinstance(f.dataType, TimestampType)
            else F.col(f.name)
            for f in frame.schema.fields
        ]
        row = F.to_json(F.struct(*columns), {"ignoreNullFields": "false"}).alias("row")
        tagged = frame.select(F.lit(name).alias("pattern"), row)
        union = tagged if union is None else union.unionByName(tagged)
    got: dict[str, Counter] = {name: Counter() for name in expected}

    def sink(batch, _id) -> None:
        for name, row in batch.collect():
            got[name][tuple(map(comparable, json.loads(row).values()))] += 1

    assert union is not None  # the example's patterns: some are accepted
    query = (
        union.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(root / "checkpoint"))
        .start()
    )
    try:
        for number, batch in enumerate(example.events()):
            write_batch(root, number, batch, example.TYPES)
            query.processAllAvailable()
    finally:
        query.stop()
    return {name: (got[name], expected[name]) for name in expected}

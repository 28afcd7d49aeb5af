"""The do-it-yourself peer: what a Spark user writes today without streamshield.

The user keeps the provider's policies beside the data and enforces them per query:

* ingest is a plain JSON -> Parquet stream that keeps each tuple's policy reference
  (``policy.ts``, ``policy.csn``) next to its values (``diy_ingest``);
* an ACL table is built on the driver from the same sps, one row per (channel, policy)
  that the query's roles may read, with one flag per attribute (``acl_table``);
* the query is a stream-static broadcast join of the data against that table, and Python
  UDFs mask the attributes the roles may not read to NULL (``diy_view``).

It exists to be measured against the secured view (``bench.table13``) and is checked to
return the same rows and masks as the secured query for the same roles
(tests/spark/test_table13.py). Its ACL is keyed by policy, so it covers policies whose
sps take in every tuple of the stream (the bench's workload); a tuple-scoped sp is
rejected rather than enforced wrongly. Nothing outside bench/ and its test uses it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType

from bench.run import plain_rows, write_parquet
from streamshield.catalog.streams import StreamDefinition
from streamshield.lang.wire import parse_lines
from streamshield.policy.elements import SpElement
from streamshield.policy.policy import Policy, label_for
from streamshield.policy.roles import RoleHierarchy
from streamshield.policy.sp_patterns import ANY

KEY = ("stream", "provider", "policy_ts")


def diy_ingest(spark: SparkSession, landing: Path, out: Path) -> float:
    """The user's ingest: the plain stream plus each tuple's policy reference."""
    rows = plain_rows(
        spark,
        landing,
        F.col("policy.ts").alias("policy_ts"),
        F.col("policy.csn").alias("policy_csn"),
    )
    return write_parquet(rows, out)


def policies(landing: Path) -> dict[tuple[str, str], dict[int, Policy]]:
    """Every channel's policies, by timestamp, read from the landing files' sp lines."""
    sps: dict[tuple[str, str, int], list] = {}
    for file in sorted(landing.rglob("*.jsonl")):
        with file.open() as lines:
            for element in parse_lines(lines):
                if isinstance(element, SpElement):
                    key = (element.channel.stream, element.channel.provider, element.sp.ts)
                    sps.setdefault(key, []).append(element.sp)
    out: dict[tuple[str, str], dict[int, Policy]] = {}
    for (stream, provider, ts), group in sps.items():
        if any(sp.ddp.tuples != ANY for sp in group):
            raise ValueError("the DIY ACL is keyed by policy: tuple-scoped sps are not supported")
        out.setdefault((stream, provider), {})[ts] = Policy.of(group)
    return out


def acl_table(
    spark: SparkSession,
    landing: Path,
    schema: StreamDefinition,
    hierarchy: RoleHierarchy,
    roles: Iterable[str],
) -> DataFrame:
    """(stream, provider, policy_ts, policy_csn, ok_<attribute>...): the policies under which
    ``roles`` may read the tuple, with whether they may read each attribute."""
    effective = frozenset(roles)
    rows = []
    for (stream, provider), by_ts in policies(landing).items():
        for ts, policy in by_ts.items():
            label = label_for(policy, stream, None, schema.names, hierarchy)
            visible = label.visible_attributes(effective)
            if label.visible(effective):
                oks = [name in visible for name in schema.names]
                rows.append((stream, provider, ts, policy.csn, *oks))
    fields = [StructField(f"ok_{name}", BooleanType(), False) for name in schema.names]
    struct = StructType(
        [
            StructField("stream", StringType()),
            StructField("provider", StringType()),
            StructField("policy_ts", LongType()),
            StructField("policy_csn", LongType()),
            *fields,
        ]
    )
    return spark.createDataFrame(rows, struct)


def _mask(value, allowed):
    return value if allowed else None


def diy_view(data: DataFrame, acl: DataFrame, schema: StreamDefinition) -> DataFrame:
    """The rows the ACL lets through (``provider``, ``seq`` and the attributes), each
    attribute masked to NULL by a Python UDF where the roles may not read it."""
    joined = data.join(F.broadcast(acl), [*KEY, "policy_csn"], "inner")
    masked = [
        F.udf(_mask, data.schema[name].dataType)(F.col(name), F.col(f"ok_{name}")).alias(name)
        for name in schema.names
    ]
    return joined.select("provider", "seq", *masked)

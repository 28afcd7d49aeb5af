"""The secured view of commit 7ab627c (a tuple test in every mask), kept for the bench only.

``python -m bench.secured_scan --legacy`` runs it as a third arm beside the plain and the
current secured query, so a before/after ratio comes from one Spark session on one load
instead of two runs an hour apart. It reads ``reason`` and repeats the tuple test inside
every attribute mask; nothing outside bench/ uses it.
"""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamshield.catalog.streams import StreamDefinition
from streamshield.engine.ingest.ingest import PASS
from streamshield.engine.views import labels
from streamshield.policy.encoding import RoleCodec


def legacy_secured_view(
    labelled: DataFrame, schema: StreamDefinition, codec: RoleCodec, roles: Iterable[str]
) -> DataFrame:
    """Rows the roles may read, unreadable attributes as NULL (the old plan shape)."""
    read = codec.query(roles)
    tuple_visible = (F.col("reason") == PASS) & labels.allows(0, read)
    visible = labelled.filter(tuple_visible)
    masked = [
        F.when(tuple_visible & labels.allows(obj, read), F.col(name)).alias(name)
        for obj, name in enumerate(schema.names, start=1)
    ]
    origin = [
        F.col("seq").alias("_ss_seq"),
        F.when(
            tuple_visible & labels.allows(schema.names.index(schema.tid) + 1, read), F.col("tid")
        ).alias("_ss_tid"),
        F.col("policy_id").alias("_ss_policy"),
    ]
    return visible.select(*origin, *masked)

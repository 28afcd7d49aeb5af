"""Secured views: what a query with given roles may see of a labelled stream.

The Security Shield filter on the tuple label and attribute masking to NULL on the
attribute labels, as plain Catalyst expressions over the label columns. User SQL is
only ever planned on top of this view, so masking sits beneath every user expression.
"""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamshield.catalog.streams import StreamDefinition
from streamshield.engine import labels
from streamshield.engine.ingest import PASS
from streamshield.policy.encoding import RoleCodec

LABEL_PREFIX = "_ss_"


def secured_view(
    labelled: DataFrame,
    schema: StreamDefinition,
    codec: RoleCodec,
    roles: Iterable[str],
    keep_labels: bool = False,
    watermark: str = "1 minute",
) -> DataFrame:
    """Rows the roles may read, unreadable attributes as NULL; labels dropped unless asked."""
    query = codec.query(roles)
    tuple_visible = (F.col("reason") == PASS) & labels.allows(0, query)
    visible = labelled.filter(tuple_visible)
    # Masks repeat the tuple test: Spark may evaluate a user predicate before the row
    # filter, and then it must only ever see NULL for rows the query cannot read.
    masked = [
        F.when(tuple_visible & labels.allows(obj, query), F.col(name)).alias(name)
        for obj, name in enumerate(schema.names, start=1)
    ]
    extra = [c for c in labelled.columns if c.startswith(LABEL_PREFIX)] if keep_labels else []
    view = visible.select("stream", "provider", "seq", "policy_id", *masked, *extra)
    if schema.event_time and schema.types[schema.event_time] == "timestamp":
        view = view.withWatermark(schema.event_time, watermark)
    return view

"""Secured views: what a query with given roles may see of a labelled stream.

The Security Shield filter on the tuple label and attribute masking to NULL on the
attribute labels, as plain Catalyst expressions over the label columns. User SQL is
only ever planned on top of this view, so masking sits beneath every user expression.
"""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamshield.engine import labels
from streamshield.engine.ingest import PASS, StreamSchema
from streamshield.policy.encoding import RoleCodec

LABEL_PREFIX = "_ss_"


def secured_view(
    labelled: DataFrame,
    schema: StreamSchema,
    codec: RoleCodec,
    roles: Iterable[str],
    keep_labels: bool = False,
) -> DataFrame:
    """Rows the roles may read, unreadable attributes as NULL; labels dropped unless asked."""
    query = codec.query(roles)
    visible = labelled.filter((F.col("reason") == PASS) & labels.allows(0, query))
    masked = [
        F.when(labels.allows(obj, query), F.col(name)).alias(name)
        for obj, name in enumerate(schema.names, start=1)
    ]
    extra = [c for c in labelled.columns if c.startswith(LABEL_PREFIX)] if keep_labels else []
    return visible.select("stream", "provider", "seq", "policy_id", *masked, *extra)

"""A labelled stream as a pattern's event source: the secured view of the pattern's
roles at its level, each event with the labels its matches are made of (docs/cep.md,
"Labels of match rows").

Beneath the pattern, exactly as beneath a query: the Security Shield's tuple filter,
the attribute masks, and, with a Chinese-Wall level ``C``, only events whose level
``C`` dominates (simple security: a pattern at ``[1, A]`` never sees an event at
``[1, B]``). What remains carries its tuple label, each attribute's label (named by
attribute, :func:`~streamshield.cep.match_labels.attribute_readers`, since a pattern's
variables are of different streams), its stream's provenance and its level words.
Native projections only.
"""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamshield.catalog.streams import StreamDefinition
from streamshield.cep.match_labels import LabelLayout, attribute_denied, attribute_readers
from streamshield.engine.views.labels import denied_column, reader_column
from streamshield.engine.views.provenance_columns import label_literals
from streamshield.engine.views.secured_view import SecuredProjection
from streamshield.policy.bitset import Words
from streamshield.policy.encoding import RoleCodec
from streamshield.policy.query_level import QueryLevel, level_names


def labelled_events(
    labelled: DataFrame,
    schema: StreamDefinition,
    codec: RoleCodec,
    roles: Iterable[str],
    level: QueryLevel | None,
    provenance: Words,
    layout: LabelLayout,
) -> DataFrame:
    """``labelled`` (a labelled store's rows, with ``layout.levels`` level words) as the
    roles may see it at ``level``, with the event labels of ``layout``."""
    view = SecuredProjection.of(
        labelled.columns, schema, codec, roles, keep_labels=True, level=level
    ).apply(labelled)
    labels = []
    for w in range(layout.width):
        labels += [F.col(reader_column(0, w)), F.col(denied_column(0, w))]
        for obj, name in enumerate(schema.names, start=1):
            labels += [
                F.col(reader_column(obj, w)).alias(attribute_readers(name, w)),
                F.col(denied_column(obj, w)).alias(attribute_denied(name, w)),
            ]
    padded = (tuple(provenance) + (0,) * layout.provenance)[: layout.provenance]
    constants = [c.alias(n) for n, c in label_literals(padded).items()]
    levels = [F.col(n) for n in level_names(layout.levels)]
    return view.select(*schema.names, *labels, *constants, *levels)

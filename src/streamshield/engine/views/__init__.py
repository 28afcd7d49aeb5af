"""What a reader may see of a labelled stream, as native Spark expressions.

Owns the columns that carry security through every query: label columns and the
secured-view tuple test (``labels``, ``secured_view``), Chinese-Wall level columns
(``level_columns``), provenance label columns for SecFilter (``provenance_columns``) and
the per-tuple label summaries that let a secured scan skip work (``scan_summary``). All
of it is Catalyst expressions, no Python per row; ingest stamps these columns, and the
queries, shared networks and delivery read them, so this package depends on none of
those.
"""

from streamshield.engine.views.labels import denied_column, label_names, reader_column
from streamshield.engine.views.level_columns import at_output_level
from streamshield.engine.views.secured_view import SecuredProjection, secured_view

__all__ = [
    "SecuredProjection",
    "at_output_level",
    "denied_column",
    "label_names",
    "reader_column",
    "secured_view",
]

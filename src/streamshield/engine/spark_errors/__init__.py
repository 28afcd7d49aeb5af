"""Spark's errors turned into what the engine may keep, show or match.

Owns the reading of Spark's refusals and failures: a query Spark rejects at plan time
becomes a :class:`QueryRejected` safe to show its author (``analysis_errors``), an error
leaving a micro-batch is cut short before Spark runs its regexes on it
(``batch_errors``), and Spark's error condition names tell an error class from a value
in a message (``error_conditions``). Ingest, the stores and the queries all raise
through here, so it depends on no other engine subpackage.
"""

from streamshield.engine.spark_errors.analysis_errors import planned
from streamshield.engine.spark_errors.batch_errors import bounded

__all__ = ["bounded", "planned"]

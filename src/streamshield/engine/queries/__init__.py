"""The queries users send, planned and run as Spark streaming queries.

Owns the query interface every text lands in (``cql_service``: CQL queries and
``INSERT SP``), the continuous queries over secured views and their sinks
(``streaming_queries``), the single-stream window queries and the window state they
keep (``window_query``, ``window_state``), the Security-Compliant Join (``scjoin``),
delegation's SPGen root (``spgen``), derived streams (``derived``), punctuated export of
a labelled output (``punctuated_export``), provenance bit ids (``source_ids``), the
handle of a query whose micro-batches the project drives itself (``driven_handle``) and
stopping a query between two batches (``batch_boundary``). ``cql_service`` reaches the
shared networks and the level processors, which in turn use the modules here, so it is
not re-exported: importing this package stays free of that cycle.
"""

from streamshield.engine.queries.batch_boundary import at_batch_boundary
from streamshield.engine.queries.streaming_queries import (
    QueryFailed,
    QueryService,
    RegisteredQuery,
)

__all__ = ["QueryFailed", "QueryService", "RegisteredQuery", "at_batch_boundary"]

"""Query sharing on Spark: the shared networks of :mod:`streamshield.network` run as
streaming queries over the labelled streams (docs/query-sharing.md).

Named for what it does rather than ``networks``, so that it reads as the execution of
the pure package :mod:`streamshield.network` (operator trees, merging, privacy switches,
no pyspark) and not a second copy of it. Owns one scan per stream shared by every
network over it (``stream_scan``, ``driven_scan``), the networks of selections and
aggregates (``shared_network``, ``shared_selections``, ``fused_branches``, the
``aggregate_*`` modules and ``arrow_merge``) and of windows (``window_network``,
``node_members``), what every network of branches keeps the same way
(``branched_network``), how far each branch has read (``branch_ledger``) and what a
privacy switch asks before a branch works (``branch_switch``).
"""

from streamshield.engine.sharing.branch_ledger import BranchLedger, owes

__all__ = ["BranchLedger", "owes"]

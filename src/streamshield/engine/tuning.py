"""How the engine runs what it runs: choices of speed that never change who gets what.

Each switch picks between two paths that deliver the same rows to the same people
(each path has its own tests, and the conformance tests run both where both exist);
what differs is how much work a micro-batch costs. The server builds one from its
settings (``streamshield serve --help``, server/settings.py) and hands it to the
engine at construction; a bench or a test that compares the two paths builds the one
it wants (``dataclasses.replace``), never patches a class.

Pure Python: no pyspark (tests/unit/test_purity.py).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EngineTuning:
    """The engine's speed choices; the defaults are the server's."""

    share: bool = True
    """Selections over one stream run as branches of its shared network
    (engine/sharing/shared_network.py), not each as a streaming query of its own."""
    share_windows: bool = True
    """Windowed queries as branches of their stream's window network
    (engine/sharing/window_network.py), one window node per shared window."""
    fuse: bool = True
    """A shared network computes its plain selections in one pass over each
    micro-batch, stored once (engine/sharing/fused_branches.py)."""
    share_aggregates: bool = True
    """Aggregates without a window as folding branches of the stream's selection
    network (engine/sharing/aggregate_fold.py), not Spark's streaming aggregation of
    their own. An aggregate that already ran as a query of its own resumes as one:
    its state is its checkpoint's."""
    share_sliding: bool = True
    """Sliding-window aggregates (``[RANGE t SLIDE s]``) fold too, keyed by their
    window (lang/sliding_fold.py); only with ``share_aggregates``."""
    prebuilt_partials: bool = True
    """Folding branches' partials built once as column expressions and collected by
    one aggregation (engine/sharing/aggregate_pass.py); off: each one's partial SQL
    planned per batch (engine/sharing/aggregate_partials.py)."""
    driven_scan: bool = True
    """A stream's networks read each batch secure ingest commits as soon as it commits
    (engine/sharing/driven_scan.py), not through a streaming query listing the
    labelled store; measured faster in 3 of 4 interleaved pairs, and a third less idle
    CPU (``bench.landing_latency``)."""
    driven_ingest: bool = True
    """Secure ingest starts a micro-batch when a file lands (engine/ingest/driven_ingest.py),
    not at a file-source streaming query's next trigger; the same batch function,
    checkpoint format and crash rules either way."""
    ingest_guess: bool = True
    """Small ingest batches labelled in one pass on a checked guess
    (engine/ingest/ingest.py); off: every batch by the passes, the path a large batch
    or a wrong guess takes (``bench.landing_latency --no-guess``)."""


SERVER = EngineTuning()
"""The server's defaults (its settings change them)."""

STREAMING = EngineTuning(driven_ingest=False)
"""The library's default (a :class:`~streamshield.engine.pipeline.Pipeline` without a
server): secure ingest as a streaming query on its trigger, which the tests of its
batch function and most benches drive with ``processAllAvailable``."""

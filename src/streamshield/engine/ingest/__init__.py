"""Secure ingest: stream elements in from the landing zone, labelled tuples out.

The trusted part of the pipeline (DESIGN.md section 2). Owns the shield itself
(``ingest``: policies checked, labels stamped), the streaming query that runs it
(``ingest_job``, or ``driven_ingest`` when a landing starts the batch), the state it
keeps between batches (``tracker_state``, ``policy_registry``), the file-source
checkpoints it reads and writes (``source_log``, ``file_source_log``) and the start-up
check that these pieces of state are in step (``ingest_consistency``). What it writes
goes to :mod:`streamshield.engine.store`.
"""

from streamshield.engine.ingest.ingest import Ingest
from streamshield.engine.ingest.policy_registry import PolicyRegistry

__all__ = ["Ingest", "PolicyRegistry"]

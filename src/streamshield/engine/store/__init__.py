"""Everything the engine keeps on storage, and how it is written so a crash loses nothing.

Owns the labelled streams (``labelled_store``: one Parquet directory per stream and
batch) and the queries' labelled results (``result_store``), what retention lets each
keep (``retention``), and the write paths under them: small Parquet writes from the
driver (``small_writes``), relations versioned by batch id (``parquet_versions``),
atomic per-batch snapshots (``snapshots``), the sweep of a killed process's unfinished
checkpoint writes (``checkpoint_leftovers``) and the rule that a root is served only
from where it was written (``root_location``).
"""

from streamshield.engine.store.labelled_store import LabelledStore

__all__ = ["LabelledStore"]

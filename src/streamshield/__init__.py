"""streamshield: secure, multi-tenant stream processing on Spark Structured Streaming.

The pure policy core lives in :mod:`streamshield.policy` (no JVM), text forms in
:mod:`streamshield.lang`; see ``docs/`` and the design brief for the big picture.
"""

__version__ = "0.1.0"

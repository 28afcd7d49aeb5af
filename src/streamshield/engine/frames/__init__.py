"""Spark frames and columns handled on the driver at a small fixed cost.

Owns the helpers every other part of the engine uses to avoid a Spark job or a Py4J call
per column: a small frame's rows computed on the driver by Spark's own expressions
(``driver_rows``), driver-side tables turned into DataFrames through Arrow
(``local_frames``), and column lists held in the JVM as one sequence (``held_columns``).
Nothing here knows about labels or policies, so every other subpackage may depend on it
and it depends on none of them.
"""

from streamshield.engine.frames.driver_rows import driver_arrow, is_local
from streamshield.engine.frames.held_columns import HeldColumns

__all__ = ["HeldColumns", "driver_arrow", "is_local"]

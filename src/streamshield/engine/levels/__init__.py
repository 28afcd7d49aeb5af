"""Chinese-Wall levels on Spark: one query processor per level (paper 2, section 6).

Owns the processor a level's queries run in (``level_processor``: a planning session
and a scheduler pool per level, reading only what the level dominates), a level's
processor as a Spark application of its own (``level_application``) and the driver
that application runs (``level_driver``). The level columns themselves are
:mod:`streamshield.engine.views.level_columns`; the lattice is
:mod:`streamshield.policy.lattice`. ``level_driver`` runs a whole query interface, so
it is not re-exported.
"""

from streamshield.engine.levels.level_application import LevelApplications
from streamshield.engine.levels.level_processor import LevelProcessor, LevelProcessors

__all__ = ["LevelApplications", "LevelProcessor", "LevelProcessors"]

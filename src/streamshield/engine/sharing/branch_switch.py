"""What every switched node kind asks before it works for a branch, and where that work
runs (docs/query-sharing.md): the networks of selections and of windows
(engine/sharing/branched_network.py) and the shared join (engine/queries/scjoin.py).

A branch computes only while its privacy switch is on, and an error asking the switch
reads as off (deny by default: a switch state nobody can tell must not compute rows for
nobody). Its Spark jobs run in the job group ``<node>:<branch>``, which is how tests
prove that an off branch did nothing (Spark's status tracker lists a group's jobs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

from streamshield.engine.levels.level_processor import POOL


def switched_on(active: Callable[[str], bool], name: str) -> bool:
    """Whether branch ``name``'s switch is on; an exception reads as off."""
    try:
        return bool(active(name))
    except Exception:  # an unknown switch state is off (deny by default)
        return False


_GROUP = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")
"""The thread's local properties ``setJobGroup`` sets."""


@contextmanager
def job_group(spark: SparkSession, node: str, part: str, pool: str | None = None) -> Iterator[None]:
    """The enclosed Spark jobs run in the job group ``<node>:<part>`` (and in scheduler
    pool ``pool`` when given: a fresh thread, such as a branch's of a micro-batch, does
    not inherit its node's pool); then the thread's group and pool are what they were (a streaming
    query's own group, which its ``stop`` cancels, or none)."""
    context = spark.sparkContext
    keys = (*_GROUP, POOL) if pool is not None else _GROUP
    before = {key: context.getLocalProperty(key) for key in keys}
    context.setJobGroup(f"{node}:{part}", f"{part} of {node}", False)
    if pool is not None:
        context.setLocalProperty(POOL, pool)
    try:
        yield
    finally:
        for key, value in before.items():
            context.setLocalProperty(key, value)  # type: ignore[arg-type]  # None: unset

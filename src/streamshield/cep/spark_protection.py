"""The protection engine of one role on Spark (docs/cep.md, "Per-role
protection on Spark").

Each view (:class:`~streamshield.cep.protection.Detector`, the union of the role's
trees) compiles to one native projection and at most one filter over its event type's
stream: the events no tree passes are filtered out (one ``where``: the OR over the
trees of the AND of each tree's Phi conditions, Fig. 3 (d)); every attribute some tree
releases is selected, psi attributes are left out (Fig. 3 (c): a new event), and an
attribute that not every tree releases is one ``CASE WHEN`` (its value where a tree
that releases it passes the event, else NULL). The paper's hash index
over event types is resolved when the plan is built (each type is its own stream,
Definition 1), so the cost per event does not depend on how many types the role has
trees for. The filter sits below the pattern's watermark on purpose: the role's
watermark moves with the events its space receives, which is what the oracle over
:func:`~streamshield.cep.protection.protect` models.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import timedelta

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streamshield.cep.match_labels import LabelLayout
from streamshield.cep.pattern import TIME, Pattern
from streamshield.cep.protection import K_DEFAULT, Detector, detectors
from streamshield.cep.spark import compile_pattern
from streamshield.cep.validation import validate
from streamshield.policy.cep_rules import COMPARATORS, AccessObject, Condition
from streamshield.policy.roles import RoleHierarchy

LABELS = "_ss_"


def protected(tree: Detector, source: DataFrame) -> DataFrame:
    """The copy of one event type's stream the role's operation space receives (label
    columns, ``_ss_*``, travel unchanged: they are what a match's labels are made of,
    and no user expression reads them)."""
    columns = [F.col(TIME), *(F.col(c) for c in source.columns if c.startswith(LABELS))]
    for name in tree.released:
        value = F.col(name)
        if not tree.everywhere(name):
            value = F.when(_condition(tree.visible(name)), value).alias(name)
        columns.append(value)
    if () not in tree.condition:
        source = source.where(_condition(tree.condition))
    return source.select(*columns)


def protected_sources(
    trees: Mapping[str, Detector], sources: Mapping[str, DataFrame]
) -> dict[str, DataFrame]:
    """Every event type the role has a tree for, protected; the others are absent."""
    return {t: protected(tree, sources[t]) for t, tree in trees.items() if t in sources}


def compile_protected(
    pattern: Pattern,
    access: AccessObject,
    hierarchy: RoleHierarchy,
    activated: Iterable[str],
    sources: Mapping[str, DataFrame],
    *,
    delay: timedelta,
    key: str | None = None,
    k: int = K_DEFAULT,
    labels: LabelLayout | None = None,
) -> DataFrame:
    """The pattern as the activated roles may run it: validated (PatternRefused), over
    the role's protected copy of the sources, with the k rule on Omega aggregates;
    ``labels``: the sources' label layout (the rows then carry their events' labels)."""
    activated = frozenset(activated)
    clearance = validate(pattern, access, hierarchy, activated, key=key)
    trees = detectors(access, hierarchy, activated)
    used = {i.type for i in pattern.items}
    inputs = protected_sources({t: trees[t] for t in used}, sources)
    return compile_pattern(
        pattern,
        inputs,
        delay=delay,
        key=key,
        min_group=k if clearance.statistics else 1,
        labels=labels,
    )


def _condition(condition: Condition) -> Column:
    """A disjunction of conjunctions as one Catalyst expression; a comparison with NULL
    is unknown, so a missing value never releases anything."""
    result = None
    for conjunction in condition:
        part = F.lit(True)
        for comparison in conjunction:
            compare = COMPARATORS[comparison.op]
            part = part & compare(F.col(comparison.attribute), F.lit(comparison.value))
        result = part if result is None else result | part
    assert result is not None  # a view has trees; a released attribute, one of them
    return F.coalesce(result, F.lit(False))

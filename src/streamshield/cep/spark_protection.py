"""The protection engine of one role on Spark (issue 15 item 3; docs/cep.md, "Per-role
protection on Spark").

Each detecting tree (:class:`~streamshield.cep.protection.Detector`) compiles to one
native projection and at most one filter over its event type's stream: xi, Phi and
Omega attributes are selected, psi attributes are left out (Fig. 3 (c): a new event),
and the events that fail the condition of any Phi attribute of the type are filtered
out (Fig. 3 (d): only events whose comparison is true pass). The paper's hash index
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
from streamshield.policy.cep_rules import COMPARATORS, AccessObject, Rule
from streamshield.policy.roles import RoleHierarchy

LABELS = "_ss_"


def protected(tree: Detector, source: DataFrame) -> DataFrame:
    """The copy of one event type's stream the role's operation space receives (label
    columns, ``_ss_*``, travel unchanged: they are what a match's labels are made of,
    and no user expression reads them)."""
    columns = [F.col(TIME), *(F.col(c) for c in source.columns if c.startswith(LABELS))]
    columns += [F.col(name) for name in tree.released]
    if tree.conditions:
        passes = _condition(tree.conditions[0])
        for rule in tree.conditions[1:]:
            passes = passes & _condition(rule)
        source = source.where(passes)
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


def _condition(rule: Rule) -> Column:
    """The Phi rule's conditions (an OR of conjunctions) as one Catalyst expression; a
    comparison with NULL is unknown, so a missing value never releases anything."""
    result = None
    for conjunction in rule.conditions:
        part = None
        for comparison in conjunction:
            compare = COMPARATORS[comparison.op]
            term = compare(F.col(comparison.attribute), F.lit(comparison.value))
            part = term if part is None else part & term
        result = part if result is None else result | part
    assert result is not None  # a Phi rule has conditions
    return F.coalesce(result, F.lit(False))

"""What the secured views of a query filter on and how its output is labelled, for ``explain``.

A user or an auditor reads here, for a registered query, the conjuncts each secured
view filters on beneath every expression of the query (the tuple label test of its
roles and, while levels are on, the Chinese-Wall conjunct of its level ``C``) and how
its output is labelled. Beside them ``explain`` shows the SQL Spark parsed for the
query, exactly as the security rewrites produced it (``rewrite_rules.Secured``), which
reads each stream as its secured view. The level conjunct is the exact text of the
engine's expression (``QueryLevel.conjunct_sql``); the roles test is named, not
spelled, since its words depend on the role layout.

Pure Python: no pyspark.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from streamshield.lang.output_level import OutputLevel
from streamshield.policy.query_level import QueryLevel


@dataclass(frozen=True)
class SecuredPlan:
    level: str | None
    """The level ``C`` the query runs at (``[1, ⊥]``); None while levels are off."""
    conjuncts: tuple[str, ...]
    """What every secured view filters on, in the order of its Filter."""
    labels: tuple[str, ...]
    """How the output rows are labelled and checked at delivery."""


def roles_test(roles: Sequence[str]) -> str:
    return f"tuple_label_allows(roles: {', '.join(sorted(roles))})"


def secured_plan(
    roles: Sequence[str],
    level: QueryLevel | None,
    output: OutputLevel = OutputLevel.QUERY,
) -> SecuredPlan:
    """What the secured views of a query run by ``roles`` at ``level`` filter on;
    ``output``: where its rows are labelled (``lang.output_level``)."""
    conjuncts = [roles_test(roles)]
    labels = [
        "readers: AND over contributors (joins: both sides); denied, provenance: OR",
        "delivery: each recipient's own roles, rights and level are checked per row",
    ]
    if level is not None:
        conjuncts.append(f"{level.conjunct_sql()} /* level(t) dominated by {level.text} */")
        written = (
            f"each row at its own tuple's level, dominated by {level.text} (a stateless "
            "selection: a row depends on its one tuple alone)"
            if output is OutputLevel.ROW
            else f"every row at {level.text} (write-equal)"
        )
        labels.insert(
            1,
            f"level: {written}; a recipient gets a row only if her session level dominates it",
        )
    return SecuredPlan(level.text if level is not None else None, tuple(conjuncts), tuple(labels))

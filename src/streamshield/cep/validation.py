"""Pattern registration against a role's attribute operators (paper 4, the algorithm
after Fig. 2; the pure part).

A pattern is refused when it reads what the role's effective rules do not release:

- an attribute with psi (or with no rule: deny by default), anywhere: WHERE (also the
  conditions of a NOT), RETURN, GROUP BY, an aggregate's argument;
- an event type whose every attribute is denied (Fig. 3 (b): no such event reaches the
  role's operation space);
- an Omega attribute outside an aggregate (raw in RETURN, WHERE or GROUP BY), or inside
  an aggregate whose function the rule does not allow.

The rules checked are those of the role's view (:func:`~streamshield.cep.protection.detectors`:
per attribute its bound, an Omega with the functions every tree releasing it allows).
A Phi attribute may be read; the protection engine (:mod:`streamshield.cep.protection`)
lets only the events that one of the role's trees passes reach its space (Fig. 3 (d),
(e)), and releases a value only where such a tree releases it (NULL elsewhere), so no
part of a pattern (WHERE, a NOT, a count) can see, and so reveal, an event or a value
outside them. :class:`Clearance` gives those pass conditions per variable and whether
the pattern aggregates an Omega attribute (then the k rule applies to its groups). A
partition key is read raw on every event: every tree of every type must release it
raw; so must every tree for a pattern that reads the event time (never masked). The
error names the attribute and the rule, never a value (the rule's constants included).
Pure: no pyspark.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from streamshield.cep.pattern import (
    Aggregate,
    Attr,
    Pattern,
    PatternError,
    attributes,
    read_attributes,
)
from streamshield.cep.protection import Detector, detectors
from streamshield.policy.cep_rules import (
    TRUE,
    AccessObject,
    Condition,
    Operator,
    Rule,
    implies,
)
from streamshield.policy.roles import RoleHierarchy


class PatternRefused(PatternError):
    """The pattern needs more than the role's operators release."""


@dataclass(frozen=True)
class Clearance:
    """What an accepted pattern may see: per variable whose type's events are filtered,
    the condition they meet to reach the role (one of the role's trees passes them: the
    Phi conditions of every Phi attribute of that tree, read by the pattern or not)."""

    conditions: dict[str, Condition]
    statistics: bool = False  # an aggregate reads an Omega attribute: the k rule applies


def validate(
    pattern: Pattern,
    access: AccessObject,
    hierarchy: RoleHierarchy,
    activated: Iterable[str],
    key: str | None = None,
) -> Clearance:
    """The pattern's clearance for the activated roles, or PatternRefused. ``key``: the
    partition key the pattern runs with (read raw on every event of every type)."""
    activated = frozenset(activated)
    trees = detectors(access, hierarchy, activated)
    for item in pattern.items:
        if item.type not in trees:
            raise PatternRefused(
                f"event type {item.type} is denied to this role (psi on every attribute)",
                item.at.line,
                item.at.column,
            )

    def rule(var: str, name: str) -> Rule:
        return trees[pattern.item(var).type].rule(name)

    for attr in _raw_reads(pattern):
        found = rule(attr.var, attr.name)
        if found.operator is Operator.DENY:
            _refuse(pattern, attr, "is denied to this role (psi)")
        if found.operator is Operator.STATISTICS:
            allowed = ", ".join(sorted(found.functions))
            _refuse(pattern, attr, f"is statistics only (Omega: {allowed}), not readable raw")
    for output in pattern.outputs:
        value = output.value
        if isinstance(value, Aggregate) and value.attr is not None:
            found = rule(value.attr.var, value.attr.name)
            if found.operator is Operator.DENY:
                _refuse(pattern, value.attr, "is denied to this role (psi)")
            if found.operator is Operator.STATISTICS and value.function not in {
                f.value for f in found.functions
            }:
                allowed = ", ".join(sorted(found.functions))
                _refuse(
                    pattern,
                    value.attr,
                    f"allows only {allowed} (Omega), not {value.function}",
                )
    if key is not None:
        for item in pattern.items:
            tree = trees[item.type]
            found = tree.rule(key)
            if found.operator is not Operator.READ or not tree.everywhere(key):
                shown = found.operator if tree.everywhere(key) else "not on every event"
                raise PatternRefused(
                    f"partition key {item.type}.{key} is not readable by this role "
                    f"({shown}); a key needs xi",
                    item.at.line,
                    item.at.column,
                )
    statistics = False
    for output in pattern.outputs:
        value = output.value
        if isinstance(value, Aggregate) and value.attr is not None:
            found = rule(value.attr.var, value.attr.name)
            statistics = statistics or found.operator is Operator.STATISTICS
    conditions = {
        item.var: trees[item.type].condition
        for item in pattern.items
        if TRUE[0] not in trees[item.type].condition
    }
    return Clearance(conditions, statistics)


def _raw_reads(pattern: Pattern) -> tuple[Attr, ...]:
    """Attributes read as values: WHERE (NOT conditions included), projections, GROUP BY.
    The event time read implicitly to order and window events is not a read; ``v.ts``
    written in the pattern is."""
    projected = tuple(o.value for o in pattern.outputs if isinstance(o.value, Attr))
    return (*attributes(pattern.where), *projected, *pattern.group_by)


def _refuse(pattern: Pattern, attr: Attr, problem: str) -> None:
    type_ = pattern.item(attr.var).type
    raise PatternRefused(
        f"attribute {type_}.{attr.name} (read as {attr.var}.{attr.name}) {problem}",
        attr.at.line,
        attr.at.column,
    )


def releases_at_least(mine: Rule, theirs: Rule) -> bool:
    """Whether a recipient acting with ``mine`` may see every raw value that ``theirs``
    (the rule the pattern's own roles act with) released into its matches.

    xi covers everything; a rule that releases no raw value (psi, Omega) needs nothing
    raw; Phi covers Phi only when each of the other's conjunctions is one of its own
    (compared as written: deny when unsure), and never xi.
    """
    if mine.operator is Operator.READ:
        return True
    if theirs.operator not in (Operator.READ, Operator.CONDITIONAL):
        return True
    if mine.operator is Operator.CONDITIONAL and theirs.operator is Operator.CONDITIONAL:
        return set(theirs.conditions) <= set(mine.conditions)
    return False


def narrower_for(
    pattern: Pattern,
    access: AccessObject,
    hierarchy: RoleHierarchy,
    recipient: Iterable[str],
    owner: Iterable[str],
) -> str | None:
    """The first attribute (``Type.attr``) on which the owner's roles release beyond the
    recipient's, or None: a recipient who could register the pattern herself must still
    not receive values released under a wider Phi, nor matches made of events her own
    space would not receive. So, per type the pattern uses, every event the owner's
    view passes must pass hers (else named by her first Phi attribute there), and every
    attribute the pattern reads must be released to her at least as far
    (:func:`releases_at_least`) on every event it is released to the owner on.
    Conditions are compared as written (:func:`~streamshield.policy.cep_rules.implies`):
    deny when unsure."""
    recipient, owner = frozenset(recipient), frozenset(owner)
    mine_all, theirs_all = (
        detectors(access, hierarchy, recipient),
        detectors(access, hierarchy, owner),
    )
    empty = Detector("", {}, ())
    for type_ in sorted({item.type for item in pattern.items}):
        mine, theirs = mine_all.get(type_, empty), theirs_all.get(type_, empty)
        if not implies(theirs.condition, mine.condition):
            rules = access.effective(hierarchy, recipient).get(type_, {})
            filtering = [n for n, r in rules.items() if r.operator is Operator.CONDITIONAL]
            return f"{type_}.{(filtering or list(rules))[0]}"
    for attr in read_attributes(pattern):
        type_ = pattern.item(attr.var).type
        mine, theirs = mine_all.get(type_, empty), theirs_all.get(type_, empty)
        if not releases_at_least(mine.rule(attr.name), theirs.rule(attr.name)) or not implies(
            theirs.visible(attr.name), mine.visible(attr.name)
        ):
            return f"{type_}.{attr.name}"
    return None

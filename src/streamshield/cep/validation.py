"""Pattern registration against a role's attribute operators (paper 4, the algorithm
after Fig. 2; issue 15 item 4, the pure part).

A pattern is refused when it reads what the role's effective rules do not release:

- an attribute with psi (or with no rule: deny by default), anywhere: WHERE (also the
  conditions of a NOT), RETURN, GROUP BY, an aggregate's argument;
- an event type whose every attribute is denied (Fig. 3 (b): no such event reaches the
  role's operation space);
- an Omega attribute outside an aggregate (raw in RETURN, WHERE or GROUP BY), or inside
  an aggregate whose function the rule does not allow.

A Phi attribute may be read; the protection engine (:mod:`streamshield.cep.protection`)
lets only the events that meet the condition of every Phi attribute of their type reach
the role's space (Fig. 3 (d), (e)), so no part of a pattern (WHERE, a NOT, a count) can
see, and so reveal, an event outside a condition. :class:`Clearance` lists those
conditions per variable and whether the pattern aggregates an Omega attribute (then the
k rule applies to its groups). A partition key is read raw on every event: it needs xi
on every type. The error names the attribute and the rule, never a value (the rule's
constants included).
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
from streamshield.policy.cep_rules import AccessObject, Conjunction, Operator, Rule
from streamshield.policy.roles import RoleHierarchy


class PatternRefused(PatternError):
    """The pattern needs more than the role's operators release."""


@dataclass(frozen=True)
class Clearance:
    """What an accepted pattern may see: per variable, the Phi conditions its events must
    meet (those of every Phi attribute of its type, read by the pattern or not; each a
    disjunction of conjunctions; every one of them must hold)."""

    conditions: dict[str, tuple[tuple[Conjunction, ...], ...]]
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

    def rule(var: str, name: str) -> Rule:
        return access.effective_rule(hierarchy, activated, pattern.item(var).type, name)

    for item in pattern.items:
        names = access.event_types.get(item.type, {})
        if all(
            access.effective_rule(hierarchy, activated, item.type, a).operator is Operator.DENY
            for a in names
        ):
            raise PatternRefused(
                f"event type {item.type} is denied to this role (psi on every attribute)",
                item.at.line,
                item.at.column,
            )
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
            found = access.effective_rule(hierarchy, activated, item.type, key)
            if found.operator is not Operator.READ:
                raise PatternRefused(
                    f"partition key {item.type}.{key} is not readable by this role "
                    f"({found.operator}); a key needs xi",
                    item.at.line,
                    item.at.column,
                )
    statistics = False
    for output in pattern.outputs:
        value = output.value
        if isinstance(value, Aggregate) and value.attr is not None:
            found = rule(value.attr.var, value.attr.name)
            statistics = statistics or found.operator is Operator.STATISTICS
    conditions: dict[str, list[tuple[Conjunction, ...]]] = {}
    for item in pattern.items:
        for name in access.event_types.get(item.type, {}):
            found = rule(item.var, name)
            if found.operator is Operator.CONDITIONAL:
                entry = conditions.setdefault(item.var, [])
                if found.conditions not in entry:
                    entry.append(found.conditions)
    return Clearance({var: tuple(c) for var, c in conditions.items()}, statistics)


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
    space would not receive. So every attribute the pattern reads must be released to
    her at least as far (:func:`releases_at_least`), and every Phi of hers on any
    attribute of a type the pattern uses, read or not, must be implied by the owner's
    Phi on it (it filters her events: Fig. 3 (d)); compared as written, deny when unsure."""
    recipient, owner = frozenset(recipient), frozenset(owner)
    for attr in read_attributes(pattern):
        type_ = pattern.item(attr.var).type
        mine = access.effective_rule(hierarchy, recipient, type_, attr.name)
        theirs = access.effective_rule(hierarchy, owner, type_, attr.name)
        if not releases_at_least(mine, theirs):
            return f"{type_}.{attr.name}"
    for type_ in sorted({item.type for item in pattern.items}):
        for name in access.event_types.get(type_, {}):
            mine = access.effective_rule(hierarchy, recipient, type_, name)
            if mine.operator is not Operator.CONDITIONAL:
                continue
            theirs = access.effective_rule(hierarchy, owner, type_, name)
            if theirs.operator is not Operator.CONDITIONAL or not set(theirs.conditions) <= set(
                mine.conditions
            ):
                return f"{type_}.{name}"
    return None

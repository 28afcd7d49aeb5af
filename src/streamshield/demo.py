"""The hospital example through the reference Security Shield.

For every role it prints the tuples and attributes the role receives and, for every
tuple it does not receive, the reason and the policy that decided. Masked attributes
show as ``-``, the way a secured view will show them as NULL.
"""

from __future__ import annotations

from collections.abc import Iterator

from streamshield.examples import hospital
from streamshield.policy.elements import TupleElement
from streamshield.policy.shield import Decision, SecurityShield

DEMO_ROLES = ("C", "GP", "ND", "ER", "INS", "E")


def shield_for(role: str) -> SecurityShield:
    return SecurityShield(
        hierarchy=hospital.hierarchy(),
        roles=[role],
        schemas=hospital.SCHEMAS,
        server=hospital.server_policies(),
    )


def _describe(element: TupleElement, decision: Decision) -> str:
    head = f"{element.channel!s:<22} seq {element.seq:>2}  patient {element.tid!s:<4}"
    if not decision.passed:
        why = decision.reason.value
        policy = f" (policy {decision.policy_id})" if decision.policy_id else ""
        return f"{head} DENIED: {why}{policy}"
    attributes = hospital.SCHEMAS[element.channel.stream].attributes
    shown = "  ".join(
        f"{a}={element.values[a] if a in decision.attributes else '-'}" for a in attributes
    )
    return f"{head} {shown}"


def report() -> Iterator[str]:
    """Lines of the per-role view, ready to print."""
    hierarchy = hospital.hierarchy()
    elements = hospital.elements()
    for role in DEMO_ROLES:
        decisions = shield_for(role).decisions(elements)
        passed = sum(d.passed for d in decisions)
        effective = ", ".join(sorted(hierarchy.effective([role])))
        yield ""
        yield f"== {hospital.ROLE_NAMES[role]} ({role}); effective roles: {effective}"
        yield f"   receives {passed} of {len(decisions)} tuples"
        for decision in decisions:
            yield "   " + _describe(decision.element, decision)

"""The cloud-auditing example as text: levels, queries, and what each auditor receives.

What ``streamshield cloud-audit`` prints. It comes from the oracle
(:mod:`streamshield.examples.cloud_audit_oracle`), the same one the server test holds
the engine to, so the printout is what the running server delivers.
"""

from __future__ import annotations

from collections.abc import Iterator

from streamshield.examples import cloud_audit as ca
from streamshield.examples import cloud_audit_oracle as oracle

SUBSCRIPTIONS = (
    *((q.owner, q.name) for q in ca.QUERIES),
    ("cloud_1b", "q7"),
    ("auditor1", "q7"),
)
"""Who subscribes to what: every owner to her queries, two auditors also to Q7."""


def _row(row: oracle.Row) -> str:
    values = "  ".join(f"{k}={v}" for k, v in row.values)
    return f"{values}  (level {ca.lattice().format(row.level)})"


def report() -> Iterator[str]:
    """Lines ready to print."""
    lattice = ca.lattice()
    yield "streamshield cloud-audit: paper 2, section 4 (COI1 = {1, 2}, COI2 = {A, B, C})"
    yield f"MessageLog at {ca.STREAM_LEVEL}; {len(ca.events())} tuples, per channel:"
    for level, count in ca.tuples_by_level():
        yield f"  {level:<8} {count:>3} tuples"
    for user in ca.USERS:
        shown = lattice.format(lattice.parse(user.level))
        yield ""
        yield f"== {user.name} at {shown}: {user.tier}"
        if user.name == ca.LOWERED_USER:
            yield f"   (lowers her session to {ca.LOWERED_TO} before phase 2)"
        for owner, name in SUBSCRIPTIONS:
            if owner != user.name:
                continue
            (query,) = (q for q in ca.QUERIES if q.name == name)
            rows = oracle.received(query, user.name)
            whose = "" if query.owner == user.name else f", owned by {query.owner}"
            yield f"   {name.upper()} at {lattice.format(lattice.parse(query.level))}{whose}: "
            yield f"     {query.text}"
            yield f"     receives {len(rows)} row(s) of {len(oracle.answers(query))}"
            for row in rows:
                yield "       " + _row(row)

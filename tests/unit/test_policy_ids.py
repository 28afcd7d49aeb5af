"""Policy ids remembered by the identity of their sps' body objects (policy.Policy.policy_id).

At one sp per tuple secure ingest makes a Policy per tuple, and rendering and hashing
each one's bodies was a third of the driver's decide pass. The id is now remembered per
tuple of body objects. The memo must never change an id: it equals the content hash of
the bodies whether it hits or misses, equal bodies get equal ids whichever objects hold
them, and a policy differing in anything the id covers never gets another's id, even
when it shares some of its objects with it (the entry is keyed by every body part).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamshield.policy import policy as policy_module
from streamshield.policy.policy import Policy, content_id
from streamshield.policy.privileges import Privilege
from streamshield.policy.punctuation import (
    DataDescription,
    SecurityPunctuation,
    SecurityRestriction,
    canonical_text,
)
from streamshield.policy.sp_patterns import Literal
from tests.unit.strategies import policies, sp_bodies


def _copied(sp: SecurityPunctuation, ts: int) -> SecurityPunctuation:
    """The same body in fresh objects (as two separate parses would give), under ``ts``."""
    ddp = DataDescription(sp.ddp.streams, sp.ddp.tuples, sp.ddp.attributes)
    srp = replace(sp.srp)
    return SecurityPunctuation(ddp, srp, sp.sign, sp.immutable, ts=ts, sn=sp.sn)


@given(policies(1), st.integers(2, 10**6))
def test_the_remembered_id_is_the_content_hash_hit_or_miss(sps, ts) -> None:
    first = Policy.of(sps).policy_id  # a miss, or a hit of an earlier example's objects
    resent = Policy.of([replace(sp, ts=ts) for sp in sps]).policy_id  # the same objects: hit
    fresh = Policy.of([_copied(sp, ts) for sp in sps]).policy_id  # new objects: a miss
    assert first == resent == fresh == content_id(sps)


@given(policies(1), policies(1))
def test_distinct_bodies_never_share_an_id(a, b) -> None:
    texts = sorted(map(canonical_text, a)), sorted(map(canonical_text, b))
    ids = Policy.of(a).policy_id, Policy.of(b).policy_id
    assert (ids[0] == ids[1]) == (texts[0] == texts[1])


@given(sp_bodies(), sp_bodies())
def test_sharing_one_body_object_does_not_share_the_id(one, other) -> None:
    """A policy holding the very ddp object of a remembered one but another restriction
    (or the same restriction and another ddp, sign or immutability) gets its own id."""
    ddp, srp, sign, immutable = one
    known = SecurityPunctuation(ddp, srp, sign, immutable, ts=1)
    assert Policy.of([known]).policy_id == content_id([known])
    o_ddp, o_srp, o_sign, _ = other
    for mixed in (
        (ddp, o_srp, sign, immutable),
        (o_ddp, srp, sign, immutable),
        (ddp, srp, o_sign, immutable),
        (ddp, srp, sign, not immutable),
    ):
        try:
            sp = SecurityPunctuation(*mixed, ts=2)
        except ValueError:  # a deny cannot carry a grant option
            continue
        assert Policy.of([sp]).policy_id == content_id([sp])


def test_a_privilege_or_grant_option_alone_changes_the_id() -> None:
    ddp = DataDescription(Literal("HeartRate"), Literal(120), Literal("ts"))
    read = SecurityPunctuation(ddp, SecurityRestriction(Literal("C")), ts=1)
    variants = [
        read,
        replace(read, srp=SecurityRestriction(Literal("C"), True)),
        replace(read, srp=SecurityRestriction(Literal("C"), privilege=Privilege.STATISTICS)),
        replace(read, immutable=True),
    ]
    ids = [Policy.of([sp]).policy_id for sp in variants]
    assert len(set(ids)) == len(variants)
    assert ids == [content_id([sp]) for sp in variants]


def test_the_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(policy_module, "_ID_LIMIT", 3)
    monkeypatch.setattr(policy_module, "_IDS", {})
    for i in range(10):
        ddp = DataDescription(Literal("HeartRate"), Literal(i), Literal("ts"))
        sp = SecurityPunctuation(ddp, SecurityRestriction(Literal("C")), ts=1)
        assert Policy.of([sp]).policy_id == content_id([sp])
        assert len(policy_module._IDS) <= 3

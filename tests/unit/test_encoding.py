"""Bitset-encoded labels decide exactly like set-based labels (what Spark will run)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streamshield.policy.encoding import RoleCodec
from streamshield.policy.policy import Policy, label_for
from streamshield.policy.privileges import Privilege
from streamshield.policy.roles import RoleHierarchy
from tests.unit.strategies import ATTRIBUTES, HIERARCHY, ROLES, TIDS, policies

CODEC = RoleCodec(HIERARCHY)


@given(
    sps=policies(ts=7),
    activated=st.sets(st.sampled_from(ROLES), min_size=1, max_size=3),
    tid=st.sampled_from(TIDS),
)
def test_encoded_label_decides_like_the_label(sps, activated, tid) -> None:
    label = label_for(Policy.of(sps), "HeartRate", tid, ATTRIBUTES, HIERARCHY)
    effective = HIERARCHY.effective(activated)
    encoded = CODEC.label(label)
    query = CODEC.query(activated)
    assert encoded.tuple_access.allows(query) == label.visible(effective)
    assert encoded.visible_attributes(query) == label.visible_attributes(effective)


def test_five_hundred_roles_span_eight_words_per_twin() -> None:
    names = [f"r{i:03d}" for i in range(500)]
    chain = RoleHierarchy.build(names, [(names[i + 1], names[i]) for i in range(499)])
    codec = RoleCodec(chain)
    assert codec.block_width == 8
    assert codec.width == 24  # READ, STATISTICS and GRANT twins
    query = codec.query(["r499"])  # the most senior role: every role is effective
    assert all(word == -1 for word in query[:7])
    assert not any(query[8:]), "a READ query has no bits outside the READ block"
    bottom = codec.query(["r000"])
    assert bottom[0] == 1 and not any(bottom[1:])


def test_sixty_four_roles_take_three_words() -> None:
    names = [f"r{i:02d}" for i in range(64)]
    codec = RoleCodec(RoleHierarchy.build(names))
    assert (codec.block_width, codec.width) == (1, 3)
    assert codec.query(["r00"], Privilege.STATISTICS) == (1, 1, 0)
    assert codec.query(["r00"], Privilege.GRANT) == (0, 0, 1)

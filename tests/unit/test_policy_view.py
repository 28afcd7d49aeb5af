"""A policy as the stream page shows it: its sps, the roles it admits and denies."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streamshield.lang.cql import parse_policy
from streamshield.policy.policy import Combine, Policy, ServerPolicy, label_for
from streamshield.policy.policy_view import admitted_among, policy_view
from streamshield.policy.privileges import Privilege
from tests.unit.strategies import ATTRIBUTES, HIERARCHY, ROLES, STREAMS, TIDS, policies


def test_admits_and_denies_are_closed_up_the_hierarchy_and_the_sps_are_listed() -> None:
    text = (
        "INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:GP;"
        "INSERT SP INTO STREAM HeartRate LET DDP = ATTRIBUTES: beats_per_min, "
        "SRP = rbac:C, SIGN = NEGATIVE"
    )
    view = policy_view(parse_policy(text, 10), HIERARCHY)
    assert "GP" in view.admits and set(HIERARCHY.readers({"GP"})) == set(view.admits)
    assert set(HIERARCHY.readers({"C"})) == set(view.denies)
    assert [(sp.sign, sp.roles, sp.attributes) for sp in view.sps] == [
        ("+", "GP", "*"),
        ("-", "C", "beats_per_min"),
    ]
    assert view.policy_id == parse_policy(text, 10).policy_id and view.ts == 10
    assert admitted_among(view, ["GP", "NOBODY"]) == ("GP",), "a reader learns only her own"


def test_a_policy_naming_an_unknown_role_admits_nobody() -> None:
    text = (
        "INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:GP;"
        "INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:NO_SUCH_ROLE"
    )
    view = policy_view(parse_policy(text, 10), HIERARCHY)
    assert view.unknown_roles and view.admits == ()


@settings(max_examples=60, deadline=None)
@given(
    policies(10),
    st.sampled_from(STREAMS),
    st.none() | st.builds(ServerPolicy, policies(5).map(tuple), st.sampled_from(Combine)),
)
def test_a_role_outside_admits_reads_nothing_under_the_policy(sps, stream, server) -> None:
    """``admits`` never under-reports: whoever may read anything is listed (a server
    policy in either mode included)."""
    policy = Policy.of(sps)
    admits = set(policy_view(policy, HIERARCHY, server).admits)
    for role in set(ROLES) - admits:
        effective = HIERARCHY.effective({role})
        for tid in TIDS:
            label = label_for(policy, stream, tid, ATTRIBUTES, HIERARCHY, server)
            for privilege in (Privilege.READ, Privilege.STATISTICS):
                assert not label.visible(effective, privilege)
                assert not label.visible_attributes(effective, privilege)

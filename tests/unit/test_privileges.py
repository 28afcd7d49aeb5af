"""Privilege twins: READ, STATISTICS and GRANT agree between the reference and the encoding."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamshield.lang.cql import parse_policy
from streamshield.lang.statistics_rewrite import rewrite_statistics
from streamshield.policy.encoding import RoleCodec
from streamshield.policy.policy import Combine, Policy, ServerPolicy, label_for
from streamshield.policy.privileges import Privilege, granted_twins, query_twins
from streamshield.policy.punctuation import (
    DataDescription,
    SecurityPunctuation,
    SecurityRestriction,
    Sign,
    canonical_text,
)
from streamshield.policy.rules import compile_rules, evaluate
from streamshield.policy.sp_patterns import ANY
from tests.unit.strategies import (
    ATTRIBUTES,
    HIERARCHY,
    ROLES,
    TIDS,
    attribute_patterns,
    role_patterns,
    stream_patterns,
    tuple_patterns,
)

CODEC = RoleCodec(HIERARCHY)
STATS = Privilege.STATISTICS


@st.composite
def privileged_policies(draw: st.DrawFn, ts: int) -> list[SecurityPunctuation]:
    sps = []
    for sn in range(1, draw(st.integers(1, 4)) + 1):
        sign = draw(st.sampled_from(Sign))
        grant = sign is Sign.GRANT
        srp = SecurityRestriction(
            draw(role_patterns),
            grant and draw(st.booleans()),
            draw(st.sampled_from([Privilege.READ, STATS])) if grant else Privilege.READ,
        )
        ddp = DataDescription(draw(stream_patterns), draw(tuple_patterns), draw(attribute_patterns))
        sps.append(SecurityPunctuation(ddp, srp, sign, draw(st.booleans()), ts=ts, sn=sn))
    return sps


@given(
    provider=privileged_policies(ts=5),
    server=st.one_of(st.none(), privileged_policies(ts=1)),
    mode=st.sampled_from(Combine),
    tid=st.sampled_from(TIDS),
    activated=st.sets(st.sampled_from(ROLES), min_size=1, max_size=3),
    privilege=st.sampled_from(Privilege),
)
def test_twins_agree_between_reference_rules_and_encoding(
    provider, server, mode, tid, activated, privilege
) -> None:
    policy = Policy.of(provider)
    srv = ServerPolicy(tuple(server), mode) if server else None
    label = label_for(policy, "HeartRate", tid, ATTRIBUTES, HIERARCHY, srv)
    encoded = CODEC.label(label)
    assert evaluate(compile_rules(policy, "HeartRate", ATTRIBUTES, CODEC, srv), tid) == encoded
    effective = HIERARCHY.effective(activated)
    query = CODEC.query(activated, privilege)
    assert encoded.tuple_access.allows(query) == label.visible(effective, privilege)
    assert encoded.visible_attributes(query) == label.visible_attributes(effective, privilege)
    assert CODEC.decode(encoded.tuple_access) == label.tuple_access


@given(provider=privileged_policies(ts=5), tid=st.sampled_from(TIDS), role=st.sampled_from(ROLES))
def test_read_implies_statistics_and_deny_takes_everything(provider, tid, role) -> None:
    label = label_for(Policy.of(provider), "HeartRate", tid, ATTRIBUTES, HIERARCHY)
    q = HIERARCHY.effective([role])
    for access in (label.tuple_access, *label.attributes.values()):
        assert not access.allows(q) or access.allows(q, STATS)
        assert access.readers <= access.statistics
        if q & access.denied:
            assert not any(access.allows(q, p) for p in Privilege)


def label(text: str, server: ServerPolicy | None = None, tid: object = 120):
    return label_for(parse_policy(text, 3), "HeartRate", tid, ATTRIBUTES, HIERARCHY, server)


def test_statistics_grant_gives_no_raw_read() -> None:
    lab = label(
        "INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:INS FOR STATISTICS"
    )
    ins = HIERARCHY.effective(["INS"])
    assert not lab.visible(ins) and lab.visible(ins, STATS)
    assert lab.visible_attributes(ins, STATS) == frozenset(ATTRIBUTES)
    encoded = CODEC.label(lab)
    assert not encoded.tuple_access.allows(CODEC.query(["INS"]))
    assert encoded.tuple_access.allows(CODEC.query(["INS"], STATS))


def test_server_statistics_narrows_a_provider_read_to_statistics() -> None:
    server = ServerPolicy(
        parse_policy(
            "INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:C FOR STATISTICS", 1
        ).sps
    )
    lab = label("INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:C", server)
    c = HIERARCHY.effective(["C"])
    assert not lab.visible(c) and lab.visible(c, STATS)


def test_grant_option_is_in_the_labels() -> None:
    lab = label(
        "INSERT SP INTO STREAM HeartRate LET DDP = ATTRIBUTES: beats_per_min, "
        "SRP = rbac:GP WITH GRANT OPTION;"
        "INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:C"
    )
    gp, c = HIERARCHY.effective(["GP"]), HIERARCHY.effective(["C"])
    assert lab.tuple_access.allows(gp, Privilege.GRANT)
    assert not lab.tuple_access.allows(c, Privilege.GRANT)
    assert lab.attributes["beats_per_min"].allows(gp, Privilege.GRANT)
    assert not lab.attributes["temperature"].allows(gp, Privilege.GRANT)
    encoded = CODEC.label(lab)
    assert encoded.tuple_access.allows(CODEC.query(["GP"], Privilege.GRANT))
    assert not encoded.tuple_access.allows(CODEC.query(["C"], Privilege.GRANT))


def test_a_deny_removes_the_grant_option() -> None:
    lab = label(
        "INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:GP WITH GRANT OPTION;"
        "INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:GP, SIGN = -"
    )
    assert not lab.tuple_access.allows(HIERARCHY.effective(["GP"]), Privilege.GRANT)


def test_twin_tables() -> None:
    assert granted_twins(Privilege.READ, False) == {Privilege.READ, STATS}
    assert granted_twins(STATS, True) == {STATS, Privilege.GRANT}
    assert query_twins(STATS) == {Privilege.READ, STATS}
    with pytest.raises(ValueError):
        granted_twins(Privilege.GRANT, False)
    with pytest.raises(ValueError):
        SecurityRestriction(ANY, privilege=Privilege.GRANT)


def test_canonical_text_distinguishes_statistics() -> None:
    read = parse_policy("INSERT SP INTO STREAM S LET DDP = TUPLES: *, SRP = rbac:C", 1).sps[0]
    stats = parse_policy(
        "INSERT SP INTO STREAM S LET DDP = TUPLES: *, SRP = rbac:C FOR STATISTICS", 1
    ).sps[0]
    assert canonical_text(read) != canonical_text(stats)
    assert not canonical_text(read).endswith("STATISTICS")  # READ ids stay as they were


# -- the statistics rewrite (pure sqlglot) ------------------------------------------------

ATTRS = ("pid", "ward", "hr")


def rewrite(sql: str) -> str:
    out = rewrite_statistics(sql, ATTRS, 1, 3)
    assert out is not None
    return out


def head(sql: str) -> str:
    return rewrite(sql).split(", COALESCE(")[0]


@pytest.mark.parametrize(
    ("fn", "rewritten"),
    [("count", True), ("sum", True), ("avg", True), ("mean", True), ("min", True),
     ("max", True), ("stddev", True), ("variance", True), ("var_pop", True),
     ("collect_list", False), ("first", False), ("any_value", False),
     ("percentile", False), ("max_by", False)],
)  # fmt: skip
def test_only_whitelisted_aggregates_read_stats_columns(fn: str, rewritten: bool) -> None:
    extra = ", 0.5" if fn == "percentile" else ", pid" if fn == "max_by" else ""
    out = head(f"SELECT {fn}(hr{extra}) FROM v")
    assert ("_ss_v3" in out) is rewritten, out


@pytest.mark.parametrize(
    "expression",
    [
        "max(CASE WHEN pid = 140 THEN hr END)",
        "sum(hr + 0)",
        "count(DISTINCT hr)",
        "avg(hr) FILTER (WHERE pid = 140)",
    ],
)
def test_anything_but_a_bare_column_stays_raw(expression: str) -> None:
    assert "_ss_v" not in head(f"SELECT {expression} FROM v")


def test_group_keys_and_where_stay_raw() -> None:
    out = rewrite("SELECT hr, avg(hr) FROM v WHERE hr > 100 GROUP BY hr")
    assert out.startswith("SELECT hr, AVG(_ss_v3)")
    assert "WHERE hr > 100 GROUP BY hr HAVING" in out


def test_release_rule_counts_hidden_contributors() -> None:
    out = rewrite("SELECT avg(hr) FROM v HAVING count(*) > 1")
    assert "HAVING COUNT(*) > 1 AND" in out
    assert "COUNT_IF(NOT _ss_f0) >= 3" in out and "_ss_f3) >= 3" in out


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT avg(hr) FROM (SELECT * FROM v)",
        "SELECT avg(a.hr) FROM v a JOIN w b ON a.pid = b.pid",
        "WITH x AS (SELECT * FROM v) SELECT avg(hr) FROM x",
        "SELECT avg(hr) FROM v WHERE pid IN (SELECT pid FROM v)",
    ],
)
def test_other_shapes_fall_back_to_the_read_view(sql: str) -> None:
    assert rewrite_statistics(sql, ATTRS, 1, 3) is None

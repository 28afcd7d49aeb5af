"""The decision table built column by column equals the one built row by row (engine/ingest/ingest).

``decision_table`` builds the broadcast table of a batch's decisions from their columns,
converting each distinct compiled policy once and picking it per decision; it must hold
exactly the rows (values, types, nulls, order) that ``local_table(_decision_rows(...))``
held: each decision's gap as the seqs of the sps around it, open at either end, and its
policy's rules, finished words and summary, or NULLs for a decision with no compiled
policy (no policy, an unusable one).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streamshield.engine.frames.local_frames import local_table
from streamshield.engine.ingest.ingest import _DECISIONS, _decision_rows, decision_table
from streamshield.engine.views import labels
from streamshield.policy.elements import Channel
from streamshield.policy.sp_patterns import ANY, Literal, OneOf, Range

STREAMS = ("HeartRate", "Pulse")
PROVIDERS = ("a", "b")
IDS = ("p1", "p2", "p3", None)
LONGS = st.integers(-(2**63), 2**63 - 1)
RULE = st.sampled_from(
    [
        labels.rule_row(ANY, (1, 2)),
        labels.rule_row(Literal(7), (0, 5)),
        labels.rule_row(Literal("x"), (3,)),
        labels.rule_row(OneOf(frozenset({Literal(1), Literal("y")})), (9, 9)),
        labels.rule_row(Range(0, 10), (2**63 - 1,)),
    ]
)
BODY = st.one_of(
    st.tuples(st.lists(RULE, min_size=1, max_size=3), st.none(), st.none()),
    st.tuples(
        st.just([]),
        st.lists(LONGS, min_size=1, max_size=6),
        st.tuples(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**31), 2**31 - 1)),
    ),
)


@st.composite
def batches(draw) -> tuple[list[tuple], dict, dict]:
    """Decisions, the compiled policies some of them name, and the sps of their channels."""
    sps = {
        Channel(s, p): [(seq, None) for seq in sorted(draw(st.sets(LONGS, max_size=4)))]
        for s in STREAMS
        for p in PROVIDERS
        if draw(st.booleans())
    }
    policies = {(s, i): draw(BODY) for s in STREAMS for i in IDS[:-1] if draw(st.booleans())}
    decisions = []
    for _ in range(draw(st.integers(0, 25))):
        stream, provider = draw(st.sampled_from(STREAMS)), draw(st.sampled_from(PROVIDERS))
        gaps = len(sps.get(Channel(stream, provider), []))
        decisions.append(
            (
                stream,
                provider,
                draw(st.integers(0, gaps)),
                draw(st.one_of(st.none(), LONGS)),
                draw(st.one_of(st.none(), LONGS)),
                draw(st.sampled_from(["pass", "no policy", "out of order"])),
                draw(st.sampled_from(IDS)),
                draw(st.one_of(st.none(), LONGS)),
            )
        )
    return decisions, policies, sps


@given(batches())
def test_the_columns_hold_the_rows(batch: tuple[list[tuple], dict, dict]) -> None:
    decisions, policies, sps = batch
    expected = local_table(_decision_rows(decisions, policies, sps), _DECISIONS)
    got = decision_table(decisions, policies, sps)
    assert got.schema == expected.schema
    assert got.to_pylist() == expected.to_pylist()


def test_a_policy_shared_by_decisions_is_the_same_in_each_row() -> None:
    body = ([], [5, 6], (1, 2))
    decisions = [("HeartRate", "a", 0, 1, 1, "pass", "p1", None)] * 3
    rows = decision_table(decisions, {("HeartRate", "p1"): body}, {}).to_pylist()
    assert [r["_ss_fixed"] for r in rows] == [[5, 6]] * 3
    assert [(r["_ss_d_after"], r["_ss_d_before"]) for r in rows] == [(-(2**63), 2**63 - 1)] * 3

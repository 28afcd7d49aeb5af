"""The reference Security Shield (paper 1, Fig. 10 and Theorem 5.1)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from streamshield.examples import hospital
from streamshield.lang.cql import parse_policy
from streamshield.lang.wire import sp_from_line, sp_line
from streamshield.policy.elements import Channel, Element, SpElement, TupleElement
from streamshield.policy.policy import Policy, label_for
from streamshield.policy.shield import Forward, PolicyTracker, Reason, SecurityShield, SpVerdict
from tests.unit.strategies import HIERARCHY, ROLES, clean_channels

HR = Channel("HeartRate", "ward-A")
BT = Channel("BodyTemperature", "ward-A")
GRANT_C = "INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:C;"
THREE = GRANT_C * 3


def shield(*roles: str, propagate: bool = True) -> SecurityShield:
    return SecurityShield(HIERARCHY, roles, hospital.SCHEMAS, propagate=propagate)


class Feed:
    """Builds one channel's elements with consecutive seq numbers."""

    def __init__(self, channel: Channel = HR) -> None:
        self.channel, self.seq, self.elements = channel, 0, []

    def sp(self, *sps) -> Feed:
        for sp in sps:
            self.seq += 1
            self.elements.append(SpElement(self.channel, self.seq, sp))
        return self

    def tuple(self, ts: int, csn: int, tid: int = 120) -> Feed:
        self.seq += 1
        values = {a: self.seq for a in hospital.SCHEMAS[self.channel.stream].attributes}
        self.elements.append(TupleElement(self.channel, self.seq, tid, ts, csn, values))
        return self


def reasons(elements: list[Element], *roles: str) -> list[Reason]:
    return [d.reason for d in shield(*(roles or ("C",))).decisions(elements)]


# Theorem 5.1, case 1(a): complete policy before the tuple.
def test_case1a_complete_policy_passes_and_is_forwarded_once() -> None:
    p = parse_policy(THREE, 10)
    feed = Feed().sp(*p.sps).tuple(10, 3).tuple(10, 3)
    out = list(shield("C").process(feed.elements))
    assert [type(o) for o in out] == [Forward, type(out[1]), type(out[2])]
    assert out[0].policy == p
    assert [o.reason for o in out[1:]] == [Reason.PASS, Reason.PASS]
    assert out[1].policy_id == p.policy_id


def test_case1a_policy_not_forwarded_without_pff_or_without_passing_tuple() -> None:
    p = parse_policy(THREE, 10)
    feed = Feed().sp(*p.sps).tuple(10, 3)
    assert not any(
        isinstance(o, Forward) for o in shield("C", propagate=False).process(feed.elements)
    )
    assert not any(isinstance(o, Forward) for o in shield("ND").process(feed.elements))


# Case 1(b): incomplete policy.
def test_case1b_missing_sp_denies_the_segment() -> None:
    one, _two, three = parse_policy(THREE, 10).sps
    feed = Feed().sp(one, three).tuple(10, 3).tuple(10, 3)
    assert reasons(feed.elements) == [Reason.INCOMPLETE_POLICY, Reason.NO_POLICY]


def test_case1b_tuple_declaring_fewer_sps_than_received() -> None:
    p = parse_policy(THREE, 10)
    assert reasons(Feed().sp(*p.sps).tuple(10, 2).elements) == [Reason.INCOMPLETE_POLICY]


# Case 2: tuple arrives before its policy.
def test_case2_tuple_before_its_policy_is_denied_and_old_policy_dropped() -> None:
    old, new = parse_policy(GRANT_C, 10), parse_policy(GRANT_C, 20)
    feed = Feed().sp(*old.sps).tuple(10, 1).tuple(20, 1).tuple(10, 1).sp(*new.sps).tuple(20, 1)
    assert reasons(feed.elements) == [
        Reason.PASS,
        Reason.OUT_OF_ORDER,  # names policy 20, which has not arrived
        Reason.NO_POLICY,  # policy 10 was dropped
        Reason.PASS,  # policy 20 arrives and governs what follows it
    ]


def test_case2_old_policy_arriving_late_is_discarded() -> None:
    old, new = parse_policy(GRANT_C, 10), parse_policy(GRANT_C, 20)
    feed = Feed().sp(*new.sps).tuple(20, 1).sp(*old.sps).tuple(10, 1).tuple(20, 1)
    assert reasons(feed.elements) == [Reason.PASS, Reason.OUT_OF_ORDER, Reason.NO_POLICY]


def test_replayed_old_policy_cannot_come_back_after_a_reset() -> None:
    old, new = parse_policy(GRANT_C, 10), parse_policy(GRANT_C, 20)
    feed = Feed().sp(*new.sps).tuple(99, 1).sp(*old.sps).tuple(10, 1)
    assert reasons(feed.elements) == [Reason.OUT_OF_ORDER, Reason.NO_POLICY]


# Case 3: an unrelated newer policy follows a policy.
def test_case3_newer_policy_replaces_current_one() -> None:
    older = parse_policy("INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:GP", 10)
    newer = parse_policy(GRANT_C, 20)
    feed = Feed().sp(*older.sps, *newer.sps).tuple(20, 1).tuple(10, 1)
    assert reasons(feed.elements, "C") == [Reason.PASS, Reason.OUT_OF_ORDER]
    assert reasons(feed.elements[:-1], "GP") == [Reason.NOT_AUTHORIZED]


def test_sp_verdicts_of_the_tracker() -> None:
    a, b = parse_policy(GRANT_C * 2, 10).sps
    tracker = PolicyTracker()
    assert tracker.on_sp(a) is SpVerdict.NEW_POLICY
    assert tracker.on_sp(a) is SpVerdict.DUPLICATE
    assert tracker.on_sp(b) is SpVerdict.ADDED
    assert tracker.on_tuple(10, 2)[0] is Reason.PASS
    assert tracker.on_sp(b) is SpVerdict.LATE, "the batch ended at its first tuple"
    (old,) = parse_policy(GRANT_C, 5).sps
    assert tracker.on_sp(old) is SpVerdict.STALE


def test_a_restored_tracker_decides_as_the_one_it_was_saved_from() -> None:
    """snapshot/restore at every step of a feed: the copy goes on exactly like the
    original (a restart replays the same decisions)."""
    a, b = parse_policy(GRANT_C * 2, 10).sps
    (gp,) = parse_policy(
        "INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:GP", 10
    ).sps
    (newer,) = parse_policy(GRANT_C, 20).sps
    steps = [a, (10, 2), b, a, gp, (10, 1), newer, (20, 1), (10, 1), b]
    tracker = PolicyTracker()
    for i, step in enumerate(steps):
        saved = json.loads(json.dumps(tracker.snapshot(sp_line)))
        copy = PolicyTracker.restore(saved, sp_from_line)
        assert copy == tracker, f"step {i}"
        original = PolicyTracker.restore(saved, sp_from_line)
        for rest in steps[i:]:
            assert step_into(copy, rest) == step_into(tracker, rest)
        tracker = original
        step_into(tracker, step)


def step_into(tracker: PolicyTracker, step: object) -> object:
    """An sp or a (policy ts, csn) tuple declaration to the tracker; its verdict."""
    if isinstance(step, tuple):
        return tracker.on_tuple(*step)
    return tracker.on_sp(step)  # type: ignore[arg-type]


def test_conflicting_sps_with_one_sequence_number_deny() -> None:
    (c,) = parse_policy(GRANT_C, 10).sps
    (gp,) = parse_policy(
        "INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:GP", 10
    ).sps
    assert reasons(Feed().sp(c, gp).tuple(10, 1).elements) == [Reason.INVALID_POLICY]


def test_unknown_role_and_unknown_stream_deny() -> None:
    bad = parse_policy("INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:Nobody", 10)
    assert reasons(Feed().sp(*bad.sps).tuple(10, 1).elements) == [Reason.INVALID_POLICY]
    feed = Feed(Channel("Unknown", "x")).sp(*parse_policy(GRANT_C, 10).sps)
    feed.seq += 1
    feed.elements.append(TupleElement(feed.channel, feed.seq, 1, 10, 1, {}))
    assert reasons(feed.elements) == [Reason.UNKNOWN_STREAM]


def test_no_policy_at_all_denies() -> None:
    assert reasons(Feed().tuple(10, 1).tuple(0, 0).elements) == [Reason.NO_POLICY] * 2


def test_channels_are_independent() -> None:
    hr = Feed(HR).sp(*parse_policy(GRANT_C, 10).sps)
    bt = Feed(BT).tuple(10, 1)
    hr.tuple(10, 1)
    assert reasons(hr.elements + bt.elements) == [Reason.PASS, Reason.NO_POLICY]


# --- properties -------------------------------------------------------------------------

roles_strategy = st.sets(st.sampled_from(ROLES), min_size=1, max_size=2)


def _oracle_clean(elements: list[Element], roles: set[str]) -> list[tuple[bool, frozenset[str]]]:
    """Declarative reading of a well-behaved channel: the latest batch before the tuple."""
    effective = HIERARCHY.effective(roles)
    current: list = []
    last_was_sp = False
    out = []
    for element in elements:
        if isinstance(element, SpElement):
            same_batch = last_was_sp and current[0].ts == element.sp.ts
            current = [*current, element.sp] if same_batch else [element.sp]
            last_was_sp = True
            continue
        last_was_sp = False
        policy = Policy.of(current)
        schema = hospital.SCHEMAS[element.channel.stream]
        lab = label_for(policy, element.channel.stream, element.tid, schema.attributes, HIERARCHY)
        out.append((lab.visible(effective), lab.visible_attributes(effective)))
    return out


@settings(max_examples=150)
@given(data=st.data(), roles=roles_strategy)
def test_clean_channel_matches_declarative_oracle(data: st.DataObject, roles: set[str]) -> None:
    elements = data.draw(clean_channels(HR))
    decisions = shield(*roles).decisions(elements)
    got = [(d.passed, d.attributes) for d in decisions]
    assert got == _oracle_clean(elements, roles)
    assert all(d.reason in (Reason.PASS, Reason.NOT_AUTHORIZED) for d in decisions)


@st.composite
def perturbed(draw: st.DrawFn) -> list[Element]:
    """A clean channel hit by drops, duplicates, swaps and forged declarations."""
    elements = list(draw(clean_channels(HR)))
    for _ in range(draw(st.integers(1, 4))):
        if not elements:
            break
        i = draw(st.integers(0, len(elements) - 1))
        kind = draw(st.sampled_from(["drop", "duplicate", "swap", "forge"]))
        if kind == "drop":
            del elements[i]
        elif kind == "duplicate":
            elements.insert(i, elements[i])
        elif kind == "swap" and i + 1 < len(elements):
            elements[i], elements[i + 1] = elements[i + 1], elements[i]
        elif kind == "forge" and isinstance(elements[i], TupleElement):
            t = elements[i]
            ts = draw(st.sampled_from([t.policy_ts, t.policy_ts + 100, 1]))
            csn = draw(st.integers(0, 4))
            elements[i] = TupleElement(t.channel, t.seq, t.tid, ts, csn, t.values)
    return elements


@settings(max_examples=200)
@given(elements=perturbed(), roles=roles_strategy)
def test_a_tuple_passes_only_under_a_complete_granting_policy(
    elements: list[Element], roles: set[str]
) -> None:
    """Theorem 5.1: pass => the sps of its (ts) received before it are exactly 1..csn,
    no newer policy came before it, and that policy grants an effective role, no deny."""
    effective = HIERARCHY.effective(roles)
    outputs = list(shield(*roles).process(elements))
    decisions = [o for o in outputs if not isinstance(o, Forward)]
    positions = [i for i, e in enumerate(elements) if isinstance(e, TupleElement)]
    assert [d.element for d in decisions] == [elements[i] for i in positions]
    for position, decision in zip(positions, decisions, strict=True):
        element = decision.element
        if not decision.passed:
            continue
        before = [e.sp for e in elements[:position] if isinstance(e, SpElement)]
        assert before, "passed with no sp before it"
        assert max(sp.ts for sp in before) == element.policy_ts, "a newer policy was in force"
        mine = {sp.sn: sp for sp in before if sp.ts == element.policy_ts}
        assert set(mine) == set(range(1, element.policy_csn + 1)), "policy not complete"
        policy = Policy.of(mine.values())
        schema = hospital.SCHEMAS[element.channel.stream]
        lab = label_for(policy, element.channel.stream, element.tid, schema.attributes, HIERARCHY)
        assert lab.visible(effective)
        assert decision.attributes == lab.visible_attributes(effective)
        assert decision.policy_id == policy.policy_id


@settings(max_examples=200)
@given(elements=perturbed(), roles=roles_strategy)
def test_policies_are_forwarded_once_complete_and_before_their_first_tuple(
    elements: list[Element], roles: set[str]
) -> None:
    outputs = list(shield(*roles).process(elements))
    forwarded_ids = []
    for index, out in enumerate(outputs):
        if isinstance(out, Forward):
            following = outputs[index + 1]
            assert not isinstance(following, Forward)
            assert following.passed and following.policy_id == out.policy.policy_id
            assert out.policy.is_complete(following.element.policy_csn)
            forwarded_ids.append(id(out.policy))
    assert len(forwarded_ids) == len(set(forwarded_ids)), "a policy was forwarded twice"
    passing = [o for o in outputs if not isinstance(o, Forward) and o.passed]
    if passing:
        first = next(i for i, o in enumerate(outputs) if not isinstance(o, Forward) and o.passed)
        assert isinstance(outputs[first - 1], Forward), "first passing tuple without its policy"


@given(
    a=clean_channels(HR),
    b=clean_channels(BT),
    order=st.lists(st.booleans(), max_size=40),
    roles=roles_strategy,
)
def test_interleaving_channels_does_not_change_decisions(a, b, order, roles) -> None:
    merged, ia, ib = [], list(a), list(b)
    for take_a in order:
        source = ia if take_a else ib
        if source:
            merged.append(source.pop(0))
    merged += ia + ib
    alone = shield(*roles).decisions(a) + shield(*roles).decisions(b)
    together = shield(*roles).decisions(merged)
    key = lambda d: (d.element.channel, d.element.seq)  # noqa: E731
    assert sorted(((key(d), d.reason, d.attributes) for d in alone), key=lambda x: x[0]) == sorted(
        ((key(d), d.reason, d.attributes) for d in together), key=lambda x: x[0]
    )

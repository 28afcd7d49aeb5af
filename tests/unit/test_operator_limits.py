"""Operator-based access control and limits (Borealis §4.3, §5.4): each limit gets a query
that tries to exceed it, next to one that stays within it."""

from __future__ import annotations

import json
import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamshield.lang.continuous import ContinuousQuery, Shape, parse_request, plan_shape
from streamshield.policy.operator_limits import (
    OPERATORS,
    LimitExceeded,
    LimitRule,
    OperatorLimits,
)

JOIN = "SELECT v.pid FROM vitals [ROWS 10] v JOIN beds [ROWS 10] b ON v.pid = b.pid"


@pytest.fixture(autouse=True)
def _quiet_sqlglot(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="sqlglot")


def shape(text: str) -> Shape:
    query = parse_request(text)
    assert isinstance(query, ContinuousQuery)
    return plan_shape(query)


def exceeded(
    limits: OperatorLimits, text: str, roles: set[str], running: list[Shape] | None = None
) -> LimitExceeded:
    with pytest.raises(LimitExceeded) as info:
        limits.check(shape(text), roles, running or [])
    return info.value


LIMITS = OperatorLimits(
    default=LimitRule(max_rows=100, max_range_seconds=60, max_queries=2, max_state_rows=150),
    roles={
        "Analyst": LimitRule(
            operators=frozenset({"join"}),
            max_rows=1_000,
            max_range_seconds=600,
            max_queries=3,
            max_state_rows=2_000,
        ),
        "Admin": LimitRule(
            operators=OPERATORS,
            max_rows=None,
            max_range_seconds=None,
            max_queries=None,
            max_state_rows=None,
        ),
        "Intern": LimitRule(max_rows=5, max_range_seconds=10, max_queries=1, max_state_rows=5),
    },
)


def test_the_built_in_default_is_conservative() -> None:
    rule = OperatorLimits().effective({"anyone"})
    assert rule.operators == frozenset()
    assert None not in (rule.max_rows, rule.max_range_seconds, rule.max_queries)
    with pytest.raises(LimitExceeded) as info:
        OperatorLimits().check(shape(JOIN), {"anyone"}, [])
    assert info.value.rule == "operator"


def test_joins_need_a_role_that_may_join() -> None:
    assert exceeded(LIMITS, JOIN, {"Nurse"}).rule == "operator"
    assert exceeded(LIMITS, JOIN, {"Intern"}).rule == "operator"
    LIMITS.check(shape(JOIN), {"Analyst"}, [])
    LIMITS.check(shape(JOIN), {"Intern", "Analyst"}, [])


def test_sort_is_a_restricted_operator() -> None:
    text = "SELECT pid, count(*) FROM vitals GROUP BY pid ORDER BY pid"
    assert exceeded(LIMITS, text, {"Analyst"}).rule == "operator"
    LIMITS.check(shape(text), {"Admin"}, [])


def test_rows_limit() -> None:
    error = exceeded(LIMITS, "SELECT * FROM vitals [ROWS 101]", {"Nurse"})
    assert error.rule == "rows" and "100 rows" in error.message
    LIMITS.check(shape("SELECT * FROM vitals [ROWS 100]"), {"Nurse"}, [])
    LIMITS.check(shape("SELECT * FROM vitals [ROWS 150]"), {"Analyst"}, [])


def test_range_limit_in_every_unit() -> None:
    assert exceeded(LIMITS, "SELECT * FROM vitals [RANGE 61]", {"Nurse"}).rule == "range"
    assert exceeded(LIMITS, "SELECT * FROM vitals [RANGE 2 MINUTES]", {"Nurse"}).rule == "range"
    assert exceeded(LIMITS, "SELECT * FROM vitals [RANGE 1 HOUR]", {"Analyst"}).rule == "range"
    LIMITS.check(shape("SELECT * FROM vitals [RANGE 1 MINUTE]"), {"Nurse"}, [])
    LIMITS.check(shape("SELECT * FROM vitals [RANGE 1 HOUR]"), {"Admin"}, [])


def test_a_patterns_within_is_held_to_the_range_limit() -> None:
    with pytest.raises(LimitExceeded) as info:
        LIMITS.check_span({"Nurse"}, 61)
    assert info.value.rule == "range" and "60 seconds" in info.value.message
    LIMITS.check_span({"Nurse"}, 60)
    LIMITS.check_span({"Nurse", "Analyst"}, 600)  # the most permissive role's limit
    LIMITS.check_span({"Admin"}, 10**9)
    with pytest.raises(LimitExceeded):
        OperatorLimits().check_span({"Nurse"}, 3_601)  # the built-in default: one hour


def test_user_written_window_calls_cannot_dodge_the_range_limit() -> None:
    long_window = "SELECT count(*) FROM vitals GROUP BY window(ts, '365 days')"
    assert exceeded(LIMITS, long_window, {"Analyst"}).rule == "range"
    for unreadable in (
        "SELECT count(*) FROM vitals GROUP BY window(ts, concat('36', '5 days'))",
        "SELECT count(*) FROM vitals GROUP BY window(ts, '1 fortnight')",
        "SELECT count(*) FROM vitals GROUP BY session_window(ts, '1 second')",
    ):
        assert exceeded(LIMITS, unreadable, {"Analyst"}).rule == "range"
        LIMITS.check(shape(unreadable), {"Admin"}, [])
    LIMITS.check(shape("SELECT count(*) FROM vitals GROUP BY window(ts, '1 minute')"), {"N"}, [])


def test_running_queries_limit_counts_the_new_one() -> None:
    one = shape("SELECT * FROM vitals")
    LIMITS.check(one, {"Nurse"}, [one])
    assert exceeded(LIMITS, "SELECT * FROM vitals", {"Nurse"}, [one, one]).rule == "queries"
    assert exceeded(LIMITS, "SELECT * FROM vitals", {"Intern"}, [one]).rule == "queries"
    LIMITS.check(one, {"Admin"}, [one] * 1000)


def test_state_limit_sums_the_users_rows_windows() -> None:
    fifty = shape("SELECT * FROM vitals [ROWS 50]")
    LIMITS.check(shape("SELECT * FROM vitals [ROWS 100]"), {"Nurse"}, [fifty])
    assert exceeded(LIMITS, "SELECT * FROM vitals [ROWS 100]", {"Nurse"}, [fifty, fifty]).rule in {
        "queries",
        "state",
    }
    running = [shape("SELECT * FROM s [ROWS 1000]"), shape("SELECT * FROM s [ROWS 900]")]
    join = "SELECT * FROM vitals [ROWS 100] x JOIN beds [ROWS 1] y ON x.k = y.k"
    assert exceeded(LIMITS, join, {"Nurse", "Analyst"}, running).rule == "state"
    LIMITS.check(shape(join), {"Nurse", "Analyst"}, running[:1])


def test_state_limit_alone() -> None:
    limits = OperatorLimits(default=LimitRule(max_rows=100, max_queries=None, max_state_rows=120))
    fifty = shape("SELECT * FROM vitals [ROWS 50]")
    limits.check(shape("SELECT * FROM vitals [ROWS 70]"), set(), [fifty])
    error = exceeded(limits, "SELECT * FROM vitals [ROWS 71]", set(), [fifty])
    assert error.rule == "state" and "120 rows" in error.message


def test_most_permissive_role_wins_limit_by_limit() -> None:
    mixed = OperatorLimits(
        roles={
            "A": LimitRule(operators=frozenset({"join"}), max_rows=10, max_range_seconds=1000),
            "B": LimitRule(operators=frozenset({"sort"}), max_rows=500, max_range_seconds=5),
        }
    )
    rule = mixed.effective({"A", "B", "Unruled"})
    assert rule.operators == {"join", "sort"}
    assert (rule.max_rows, rule.max_range_seconds) == (500, 1000)


def test_unlimited_beats_any_number() -> None:
    rule = LIMITS.effective({"Intern", "Admin"})
    assert rule.max_rows is None and rule.max_queries is None


def test_no_rule_for_any_role_means_the_default() -> None:
    assert LIMITS.effective({"Nurse", "Doctor"}) == LIMITS.default
    assert LIMITS.effective(set()) == LIMITS.default


def test_messages_name_the_limit_never_the_query() -> None:
    text = "SELECT 'secret-4711' AS s FROM vitals [ROWS 999999] WHERE name = 'Alice'"
    error = exceeded(LIMITS, text, {"Nurse"})
    assert "4711" not in str(error) and "Alice" not in str(error) and "999999" not in str(error)


def test_dict_round_trip_through_json() -> None:
    stored = json.loads(json.dumps(LIMITS.to_dict()))
    assert OperatorLimits.from_dict(stored) == LIMITS


def test_role_rules_take_missing_settings_from_the_default() -> None:
    limits = OperatorLimits.from_dict(
        {
            "default": {"max_rows": 7, "max_queries": 3},
            "roles": {"Analyst": {"operators": ["join"], "max_range_seconds": None}},
        }
    )
    analyst = limits.roles["Analyst"]
    assert analyst.max_rows == 7 and analyst.max_queries == 3
    assert analyst.max_range_seconds is None and analyst.operators == {"join"}
    assert limits.default.max_range_seconds == LimitRule().max_range_seconds


@pytest.mark.parametrize(
    "data",
    [
        [],
        {"defaults": {}},
        {"default": []},
        {"default": {"max_rows": -1}},
        {"default": {"max_rows": "10"}},
        {"default": {"max_rows": 1.5}},
        {"default": {"max_rows": True}},
        {"default": {"unlimited": True}},
        {"default": {"operators": "join"}},
        {"default": {"operators": ["join", "reflect"]}},
        {"roles": []},
        {"roles": {"A": {"max_queries": -2}}},
        {"roles": {"A": None}},
        {"roles": {1: {}}},
    ],
)
def test_malformed_settings_are_errors_not_unlimited(data: object) -> None:
    with pytest.raises(ValueError):
        OperatorLimits.from_dict(data)  # type: ignore[arg-type]


limit_values = st.one_of(st.none(), st.integers(0, 10_000))
rules = st.builds(
    LimitRule,
    operators=st.frozensets(st.sampled_from(sorted(OPERATORS))),
    max_rows=limit_values,
    max_range_seconds=limit_values,
    max_queries=limit_values,
    max_state_rows=limit_values,
)


@given(
    st.dictionaries(st.sampled_from(["A", "B", "C", "D"]), rules, max_size=4),
    rules,
    st.frozensets(st.sampled_from(["A", "B", "C", "D", "E"])),
    st.sampled_from(["A", "B", "C", "D", "E"]),
)
def test_adding_a_role_never_lowers_a_limit(
    roles: dict[str, LimitRule], default: LimitRule, held: frozenset[str], extra: str
) -> None:
    limits = OperatorLimits(default, roles)
    assert OperatorLimits.from_dict(json.loads(json.dumps(limits.to_dict()))) == limits
    before, after = limits.effective(held), limits.effective(held | {extra})
    if not any(r in roles for r in held):
        return  # the default applied before; a first ruled role replaces it
    assert before.operators <= after.operators
    for name in ("max_rows", "max_range_seconds", "max_queries", "max_state_rows"):
        old, new = getattr(before, name), getattr(after, name)
        assert new is None or (old is not None and new >= old)

"""The random shared-operator networks of bench/prs_networks.py (PrS paper, section 6.1)."""

from __future__ import annotations

import pytest
from bench.prs_networks import STREAMS, generate

from streamshield.network.operators import Select
from streamshield.network.switch_state import operators_off


@pytest.mark.parametrize(
    ("queries", "operators", "degree"),
    [(3, 15, 0.0), (3, 15, 0.5), (5, 25, 0.2), (5, 25, 0.8), (3, 20, 0.5)],
)
def test_a_network_has_the_asked_size_and_measured_degree(
    queries: int, operators: int, degree: float
) -> None:
    for seed in range(4):
        g = generate(queries, operators, degree, seed)
        assert sorted(g.queries) == [f"Q{i + 1}" for i in range(queries)]
        assert operators <= g.operators <= operators + 2
        assert abs(g.degree - degree) <= 0.08
        assert len(g.network.common_prefix) == round(g.degree * g.operators)
        assert g.network.streams <= set(STREAMS)
        assert all(1 <= len(users) <= 3 for users in g.users.values())


def test_the_same_arguments_draw_the_same_network_and_others_differ() -> None:
    a, b = generate(3, 20, 0.5, seed=7), generate(3, 20, 0.5, seed=7)
    assert a.network.canonical == b.network.canonical and a.users == b.users
    assert generate(3, 20, 0.5, seed=8).network.canonical != a.network.canonical


def test_no_two_selects_share_a_conjunct_so_the_merge_shares_only_what_was_built() -> None:
    for seed in range(6):
        g = generate(5, 25, 0.6, seed)
        atoms = [a for n in g.network.nodes if isinstance(n, Select) for a in n.predicate.conjuncts]
        assert len(atoms) == len(set(atoms))


def test_losing_every_user_of_queries_turns_off_exactly_what_only_they_use() -> None:
    g = generate(3, 20, 0.5, seed=3)
    assert operators_off(g.network, g.state()) == frozenset()
    for lost in ({"Q1"}, {"Q2", "Q3"}):
        off = operators_off(g.network, g.state(frozenset(lost)))
        only_theirs = {n for n, qs in g.network.usage.items() if qs <= lost}
        assert off == only_theirs and off
    everyone = operators_off(g.network, g.state(frozenset(g.queries)))
    assert everyone == g.network.nodes


def test_impossible_targets_are_refused() -> None:
    with pytest.raises(ValueError, match="degree"):
        generate(3, 15, 1.0, seed=0)
    with pytest.raises(ValueError, match="fewer private operators"):
        generate(5, 4, 0.5, seed=0)
    with pytest.raises(RuntimeError, match="no network"):  # 8 of 15 is not 50% exactly
        generate(3, 15, 0.5, seed=0, tolerance=0.0, attempts=3)

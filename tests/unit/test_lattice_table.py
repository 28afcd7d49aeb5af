"""The conformance table (tests/conformance/levels.json) against the pure lattice.

The Spark encoding runs the same rows in tests/spark/test_level_columns.py.
"""

from __future__ import annotations

import pytest

from streamshield.policy.coi import LatticeError
from streamshield.policy.lattice import Lattice
from tests.conformance.levels import TABLE, case_id, cases, lattice


def test_the_table_is_large_and_covers_every_kind() -> None:
    assert len(cases("id")) >= 80
    kinds = {c["error"] for c in cases("error")}
    assert kinds >= {
        "arity",
        "syntax",
        "unknown_company",
        "wrong_class",
        "two_companies_one_class",
        "top_in_ci",
        "bad_words",
        "no_classes",
        "duplicate_company",
        "duplicate_class",
        "too_few_companies",
        "bad_name",
    }
    assert lattice("wide").width == 3  # more than 64 companies span words
    assert len({c["id"] for c in cases("id")}) == len(cases("id")), TABLE


@pytest.mark.parametrize("case", cases("a", "b"), ids=case_id)
def test_pairs(case) -> None:
    lat = lattice(case["lattice"])
    a, b = lat.parse(case["a"]), lat.parse(case["b"])
    assert lat.dominated(a, b) is case["a_dominated_by_b"]
    assert lat.dominated(b, a) is case["b_dominated_by_a"]
    assert lat.lub(a, b) == lat.parse(case["lub"])
    assert lat.glb(a, b) == lat.parse(case["glb"])
    # the same answers from the words Spark stores
    wa, wb = lat.encode(a), lat.encode(b)
    assert lat.words_dominated(wa, b) is case["a_dominated_by_b"]
    assert lat.words_dominated(wb, a) is case["b_dominated_by_a"]
    assert lat.decode(lat.lub_words(wa, wb)) == lat.parse(case["lub"])
    assert lat.decode(lat.glb_words(wa, wb)) == lat.parse(case["glb"])


@pytest.mark.parametrize("case", cases("group"), ids=case_id)
def test_groups(case) -> None:
    lat = lattice(case["lattice"])
    levels = [lat.parse(t) for t in case["group"]]
    assert lat.lub(*levels) == lat.parse(case["lub"])
    assert lat.glb(*levels) == lat.parse(case["glb"])
    # the aggregate's form: one OR per word over the group, a missing level marked
    words = [lat.encode(level) for level in levels]
    assert lat.decode(lat.lub_group(words)) == lat.parse(case["lub"])
    marked = lat.lub_group([*words, None])
    assert marked == lat.unknown and not lat.words_dominated(marked, lat.trusted)


@pytest.mark.parametrize("case", cases("parse"), ids=case_id)
def test_text_forms(case) -> None:
    lat = lattice(case["lattice"])
    if "error" in case:
        with pytest.raises(LatticeError) as caught:
            lat.parse(case["parse"])
        assert caught.value.kind == case["error"], str(caught.value)
        return
    level = lat.parse(case["parse"])
    assert lat.format(level) == case["text"]
    assert lat.format(level, ascii=True) == case["ascii"]
    assert lat.parse(case["ascii"]) == lat.parse(case["text"]) == level


def _outcome(case, build):
    lat = lattice(case["lattice"])
    if "error" in case:
        with pytest.raises(LatticeError) as caught:
            build(lat)
        assert caught.value.kind == case["error"], str(caught.value)
    else:
        assert build(lat) == lat.parse(case["level"])


@pytest.mark.parametrize("case", cases("companies"), ids=case_id)
def test_levels_of_companies(case) -> None:
    _outcome(case, lambda lat: lat.level_of(case["companies"]))


@pytest.mark.parametrize("case", cases("ci"), ids=case_id)
def test_ci_classes(case) -> None:
    _outcome(case, lambda lat: lat.ci_level(lat.classes.ci_class("ci", case["ci"])))


@pytest.mark.parametrize("case", cases("ci_text"), ids=case_id)
def test_ci_text(case) -> None:
    _outcome(case, lambda lat: lat.ci_level(lat.parse_ci("ci", case["ci_text"])))


@pytest.mark.parametrize("case", cases("words"), ids=case_id)
def test_decoding(case) -> None:
    _outcome(case, lambda lat: lat.decode(tuple(case["words"])))


@pytest.mark.parametrize("case", cases("classes"), ids=case_id)
def test_class_definitions(case) -> None:
    with pytest.raises(LatticeError) as caught:
        Lattice.of(case["classes"], case.get("order"))
    assert caught.value.kind == case["error"], str(caught.value)

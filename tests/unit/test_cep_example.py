"""The smart-building example (docs/cep.md): all four operators, three roles, and
the refusals, through ``streamshield cep-example`` (the oracle; ``--spark``, which
runs it on local Spark and compares, is a documented command outside the suite)."""

from __future__ import annotations

from click.testing import CliRunner

from streamshield.cli import main
from streamshield.examples import smart_building as example
from streamshield.policy.cep_rules import Operator


def test_the_example_shows_every_operator_and_its_effect() -> None:
    operators = {r.operator for r in example.ACCESS.rules.values()}
    assert operators == set(Operator)
    assert sorted(example.run_role("facility", example.PATTERNS[0][2])) == [
        ("O2", 55.0, 2),
        ("S1", 58.0, 4),
        ("S1", 61.0, 4),
    ]
    # Phi: only the server room's door events reach the desk (no O2 row, not even NULL)
    assert example.run_role("desk", example.PATTERNS[3][2]) == [("S1", "Ada")]
    # Omega with the k rule: the one-pair groups of K3 and L1 are withheld
    heat = example.run_role("auditor", example.PATTERNS[4][2])
    assert sorted(row[2:] for row in heat) == [("O2", 3, 55.0), ("S1", 3, 61.0)]


def test_the_cli_prints_rows_and_refusals_without_values() -> None:
    result = CliRunner().invoke(main, ["cep-example"])
    assert result.exit_code == 0, result.output
    assert "S1, Ada" in result.output and "NULL" not in result.output
    assert "desk      receives Door: room:xi, person:phi (only events meeting" in result.output
    assert "Door.person (read as d.person) is denied" in result.output
    assert "allows only avg, count, max (Omega), not min" in result.output
    refusals = [line for line in result.output.splitlines() if "refused" in line]
    assert len(refusals) == 3 and not any("S1" in line or "50" in line for line in refusals)

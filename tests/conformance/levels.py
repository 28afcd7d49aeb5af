"""The language-neutral Chinese-Wall table (levels.json), loaded for Python test runners."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from streamshield.policy.lattice import Lattice

TABLE = Path(__file__).with_name("levels.json")


@cache
def _table() -> dict[str, Any]:
    return json.loads(TABLE.read_text(encoding="utf-8"))


def cases(*keys: str) -> list[dict[str, Any]]:
    """The cases that have every one of ``keys`` (their kind), in table order."""
    return [c for c in _table()["cases"] if all(k in c for k in keys)]


def case_id(case: dict[str, Any]) -> str:
    return f"{case['id']}-{case.get('lattice', 'classes')}"


def lattice(name: str) -> Lattice:
    spec = _table()["lattices"][name]
    return Lattice.of([tuple(c) for c in spec["classes"]], spec.get("order"))

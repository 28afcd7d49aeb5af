"""What a query's owner must still give it to run: a role of its record, READ TUPLE or
READ AGGREGATE (the statistics right) on every input, and a clearance dominating its
level. ``query_requests.right_lost`` names the first right missing, with stand-ins for
the catalog (the server runs it after every change: tests/server/test_role_changes.py).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from streamshield.server.query_requests import right_lost
from tests.unit.test_level_application import at


class Catalog:
    """The owner's READ rights (raw, aggregate) and whether her clearance dominates."""

    def __init__(self, raw: set[str], aggregate: set[str], cleared: bool = True) -> None:
        self.raw, self.aggregate, self.cleared = raw, aggregate, cleared
        self.reads = 0

    def readable_sources(self, _who: str) -> tuple[set[str], set[str]]:
        self.reads += 1
        return self.raw, self.aggregate

    def clearance_dominates(self, _user: str, _level: str) -> bool:
        return self.cleared


def lost(catalog: Catalog, roles=("AUD",), level: str | None = None, cache=None) -> Any:
    query = SimpleNamespace(inputs=("MessageLog", "Audit"), level=at(level) if level else None)
    return right_lost(catalog, query, "ann", roles, {} if cache is None else cache)  # type: ignore[arg-type]


def test_every_right_kept_loses_nothing() -> None:
    assert lost(Catalog({"MessageLog", "Audit"}, set())) is None


def test_the_statistics_right_alone_is_enough_to_run() -> None:
    assert lost(Catalog({"MessageLog"}, {"Audit"})) is None


def test_an_input_without_read_stops_it() -> None:
    assert lost(Catalog({"MessageLog"}, set())) == "its owner no longer holds READ on Audit"


def test_no_role_left_stops_it_before_anything_is_read() -> None:
    catalog = Catalog({"MessageLog", "Audit"}, set())
    assert lost(catalog, roles=()) == "its owner acts with none of its roles"
    assert catalog.reads == 0


def test_a_level_above_the_clearance_stops_it() -> None:
    catalog = Catalog({"MessageLog", "Audit"}, set(), cleared=False)
    assert lost(catalog, level="[1, B]") == (
        "its owner's clearance no longer dominates its level [1, B]"
    )
    assert lost(catalog) is None  # levels off: no clearance to lose


def test_one_owner_is_read_once_per_reconciliation() -> None:
    catalog, cache = Catalog({"MessageLog", "Audit"}, set()), {}
    lost(catalog, cache=cache)
    lost(catalog, cache=cache)
    assert catalog.reads == 1

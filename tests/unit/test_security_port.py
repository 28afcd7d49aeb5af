"""The server's one view of the security catalog (server/security_port.py) stays true:
every method of the ``SecurityApi`` protocol exists on ``SecurityCatalog`` and takes the
parameters the protocol names, by name and kind, so a renamed or dropped parameter in
the catalog fails here rather than in a request."""

from __future__ import annotations

import inspect

import pytest

from streamshield.catalog.security import SecurityCatalog
from streamshield.server.security_port import SecurityApi

METHODS = sorted(
    name
    for name, member in vars(SecurityApi).items()
    if callable(member) and not name.startswith("_")
)


def test_the_protocol_lists_what_the_port_calls() -> None:
    assert len(METHODS) >= 25


@pytest.mark.parametrize("name", METHODS)
def test_the_catalog_offers_each_method_of_the_protocol(name: str) -> None:
    wanted = inspect.signature(getattr(SecurityApi, name)).parameters
    offered = inspect.signature(getattr(SecurityCatalog, name)).parameters
    for parameter in wanted.values():
        assert parameter.name in offered, f"{name}: no parameter {parameter.name}"
        assert offered[parameter.name].kind == parameter.kind, f"{name}: {parameter.name}"
    required = {
        n for n, p in offered.items() if p.default is p.empty and p.kind is not p.VAR_KEYWORD
    }
    assert required <= set(wanted), f"{name}: the catalog requires more than the protocol gives"

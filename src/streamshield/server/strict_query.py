"""Unknown query parameters are refused (422), as unknown body fields are.

FastAPI ignores a query parameter a route does not declare, so a typo (``?asign=seq``,
``?befor_id=``) would be served as if it had not been written: the caller gets an
answer to another question than the one she asked, silently. Request bodies are strict
for the same reason (:mod:`streamshield.server.models`). Found by the API fuzzer
(schemathesis' negative mode sends undeclared parameters and expects a refusal).

The message lists the parameters the route knows, never the unknown name (it is the
caller's text, not a field of ours).
"""

from __future__ import annotations

from typing import Any

from fastapi import Request

from streamshield.server.errors import Invalid


def declared_query(dependant: Any) -> frozenset[str]:
    """The query parameter names of a route's dependency tree."""
    names: set[str] = set()
    pending = [dependant]
    while pending:
        current = pending.pop()
        names.update(field.alias for field in current.query_params)
        pending.extend(current.dependencies)
    return frozenset(names)


def known_query_only(request: Request) -> None:
    """A dependency of every route: 422 naming the known parameters on any other."""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None or not request.query_params:
        return
    known = getattr(route, "_declared_query", None)
    if known is None:  # computed once per route, kept on the route itself
        known = declared_query(dependant)
        route._declared_query = known  # type: ignore[union-attr]
    if any(name not in known for name in request.query_params):
        allowed = ", ".join(sorted(known)) or "none"
        raise Invalid(f"unknown query parameter (this route takes: {allowed})")

"""``GET /schema/wire``: the JSON Schema of one wire-format line, for providers.

No authentication: it describes the public format every provider must write and
reveals nothing about any stream, policy or user (the same text is in
docs/wire-format.md).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from streamshield.lang.wire import json_schema

router = APIRouter(tags=["providers"])


@router.get(
    "/schema/wire",
    response_model=dict[str, Any],
    summary="JSON Schema of one wire-format line (tuple or sp); no authentication",
)
def wire_schema() -> dict[str, Any]:
    return json_schema()

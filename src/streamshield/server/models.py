"""Request bodies of the API: strict pydantic models with bounded sizes.

Strict (no coercion, no unknown fields) for the same reason as the wire format: a
field silently defaulted or a typo silently ignored could grant more than intended.
Bounds keep a single request cheap to validate (C3).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z][A-Za-z0-9_]{0,63}$")]
UserName = Annotated[str, StringConstraints(min_length=1, max_length=128)]
TypeName = Annotated[str, StringConstraints(min_length=1, max_length=32)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class LoginBody(_Strict):
    user: UserName
    password: Annotated[str, StringConstraints(min_length=1, max_length=1024)]
    roles: list[Annotated[str, StringConstraints(min_length=1, max_length=128)]] = Field(
        min_length=1, max_length=64
    )


class SchemaBody(_Strict):
    name: Name
    attributes: list[Annotated[list[Name | TypeName], Field(min_length=2, max_length=2)]] = Field(
        min_length=1, max_length=256
    )
    tid: Name
    event_time: Name | None = None


class StreamBody(_Strict):
    name: Name
    schema_name: Name = Field(alias="schema")


class QueryBody(_Strict):
    name: Name
    output: Name | None = None
    text: Annotated[str, StringConstraints(min_length=1, max_length=20_000)]


class GrantBody(_Strict):
    kind: Annotated[str, StringConstraints(pattern=r"^(system|schema|stream|query)$")]
    object: Annotated[str, StringConstraints(min_length=1, max_length=128)]
    permission: Annotated[str, StringConstraints(min_length=1, max_length=32)]
    role: Annotated[str, StringConstraints(min_length=1, max_length=128)] | None = None
    user: UserName | None = None
    grant_option: bool = False


class SettingsBody(_Strict):
    values: dict[Annotated[str, StringConstraints(max_length=128)], Any] = Field(max_length=64)

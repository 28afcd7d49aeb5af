"""Request and response bodies of the API: strict request models with bounded sizes.

Strict (no coercion, no unknown fields) for the same reason as the wire format: a
field silently defaulted or a typo silently ignored could grant more than intended.
Bounds keep a single request cheap to validate (C3).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, StringConstraints

Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z][A-Za-z0-9_]{0,63}$")]
UserName = Annotated[str, StringConstraints(min_length=1, max_length=128)]
TypeName = Annotated[str, StringConstraints(min_length=1, max_length=32)]
TagName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")]
AttributeTags = Annotated[
    dict[Name, Annotated[list[TagName], Field(max_length=64)]],
    Field(
        max_length=256,
        description="Classification tags per attribute (case-insensitive, stored upper "
        'case), e.g. {"diagnosis": ["PHI"]}: a server policy may address every '
        "attribute so tagged (ATTRIBUTES: TAGGED PHI).",
    ),
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class LoginBody(_Strict):
    user: UserName
    password: Annotated[str, StringConstraints(min_length=1, max_length=1024)]
    roles: list[Annotated[str, StringConstraints(min_length=1, max_length=128)]] = Field(
        min_length=1, max_length=64
    )
    level: Annotated[str, StringConstraints(min_length=2, max_length=4096)] | None = Field(
        default=None,
        description="A Chinese-Wall level to run the session at, e.g. [1, B] (dominated by "
        "the user's clearance; 403 above_clearance otherwise, and no session is opened). "
        "Without it the session runs at public; PUT /me/level changes it later.",
    )


class SchemaBody(_Strict):
    name: Name
    attributes: list[Annotated[list[Name | TypeName], Field(min_length=2, max_length=2)]] = Field(
        min_length=1, max_length=256
    )
    tid: Name
    event_time: Name | None = None
    not_null: list[Name] = Field(
        default_factory=list,
        max_length=256,
        description="Attributes a tuple must carry, not null: a tuple without one is "
        "refused (`missing_attribute`), as one without its tid or event time always is; "
        "every other attribute may be left out or null.",
    )
    tags: AttributeTags = Field(default_factory=dict)


class TagsBody(_Strict):
    tags: AttributeTags


class ServerPolicyBody(_Strict):
    cql: Annotated[str, StringConstraints(min_length=1, max_length=65_536)] = Field(
        description="INSERT SP statements; for a glob scope INTO STREAM names no stream "
        "(or one the scope takes in)"
    )
    mode: Literal["intersect", "union"] = "intersect"


class ServerPolicyOut(BaseModel):
    scope: str = Field(description="A stream, or a stream-name glob (ward*, *)")
    mode: Literal["intersect", "union"]
    sps: int = Field(description="How many sps the policy has")


class ServerPolicies(BaseModel):
    policies: list[ServerPolicyOut]


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


# -- responses ------------------------------------------------------------------------------
# Not strict: they describe what the server sends (and what clients may rely on), so the
# OpenAPI document is the contract; extra keys are never sent, they are just not forbidden.


class Problem(BaseModel):
    field: str = Field(description="Where the problem is, e.g. body.text")
    problem: str = Field(description="What is wrong with it (never the submitted value)")


class ErrorBody(BaseModel):
    """Every error: a machine-readable code, a message safe to show, and for invalid
    request bodies the problems by field. Messages name fields, columns, clauses and
    rules, never data values."""

    error: str = Field(
        description="Code, e.g. invalid, unauthorized, forbidden, not_found, exists, "
        "too_large, throttled, limit_exceeded, query_rejected.<rule>",
        examples=["query_rejected.unresolved_column"],
    )
    message: str = Field(examples=["unknown column `nope` [UNRESOLVED_COLUMN.WITH_SUGGESTION]"])
    problems: list[Problem] | None = Field(
        default=None, description="Request validation problems (422 invalid only)"
    )


class LoginAnswer(BaseModel):
    token: str = Field(description="Bearer token for `Authorization: Bearer <token>`")
    user: str
    roles: list[str] = Field(description="The roles active in this session")
    expires_at: str = Field(description="ISO-8601 UTC", examples=["2026-11-23T13:00:00Z"])
    level: str | None = Field(
        default=None, description="The Chinese-Wall level activated at login, if one was asked"
    )


class LogoutAnswer(BaseModel):
    ok: bool = True


class NamedItem(BaseModel):
    name: str


class StreamItem(BaseModel):
    name: str
    kind: Literal["input", "output"]


class QueryItem(BaseModel):
    name: str
    owner: str
    inputs: list[str]
    output: str | None = None
    status: str = Field(description="running, stopped, failed (GET /queries/{name}: why)")


class CatalogView(BaseModel):
    """What the caller may see; objects without VIEW OBJECT are absent."""

    schemas: list[NamedItem]
    streams: list[StreamItem]
    queries: list[QueryItem]


class StreamDefinitionOut(BaseModel):
    name: str
    attributes: list[list[str]] = Field(
        description="[name, type] pairs", examples=[[["id", "bigint"], ["price", "double"]]]
    )
    tid: str
    event_time: str | None = None
    not_null: list[str] = Field(default_factory=list, description="NOT NULL attributes")
    tags: dict[str, list[str]] = Field(
        default_factory=dict, description="Classification tags per attribute (upper case)"
    )


class InputStreamInfo(StreamDefinitionOut):
    kind: Literal["input"] = "input"


class OutputStreamInfo(BaseModel):
    name: str
    kind: Literal["output"] = "output"
    query: str | None = Field(default=None, description="The query writing this stream")
    columns: list[str] = Field(description="Columns a subscriber receives")


StreamInfo = Annotated[InputStreamInfo | OutputStreamInfo, Field(discriminator="kind")]


class LineRejectionOut(BaseModel):
    line: int = Field(description="1-based line number in the request body")
    reason: str = Field(examples=["stale_seq", "stream_mismatch", "not_permitted"])
    message: str


class AppendAnswer(BaseModel):
    accepted: int
    rejected: int
    rejections: list[LineRejectionOut]
    assigned: dict[str, int] | None = Field(
        default=None,
        description="With assign=seq: the last seq given per provider channel in this request",
    )


class QueryRegistered(BaseModel):
    name: str
    output: str = Field(description="The output stream subscribers read")
    status: str
    inputs: list[str]


class SpsInjected(BaseModel):
    """The answer to an INSERT SP script: where the policy went, and the (ts, csn) the
    provider's tuples declare to be governed by it."""

    stream: str
    provider: str
    ts: int
    csn: int
    last_seq: int


class QueryStatus(BaseModel):
    name: str
    status: str


class Removed(BaseModel):
    """What a DELETE of a named object answers: the name it removed."""

    removed: str


class GrantAnswer(BaseModel):
    granted: bool = True


class RevokeAnswer(BaseModel):
    revoked: bool = True


class SettingsView(RootModel[dict[str, Any]]):
    """Settings in force: defaults overlaid with stored values, by key."""


class AuditPage(BaseModel):
    model_config = ConfigDict(extra="allow")

    entries: list[dict[str, Any]] = Field(description="Audit entries the caller may read")

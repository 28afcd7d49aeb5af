"""The JSON-lines wire format of stream elements (tuples and sps) on a channel.

One element per line. Sps carry their patterns in the same text form as CQL, so a
provider writes ``"tuples": "[120, 133]"`` and the pattern grammar checks it. Every
field is required and no unknown field is accepted: a policy that silently defaulted
a missing tuple scope to ``*`` would grant more than its author wrote. Errors name the
line and the field; nothing of a bad line is kept.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, TypeAdapter
from pydantic import ValidationError as _ValidationError

from streamshield.lang.cql import CqlError, parse_pattern
from streamshield.policy.elements import Channel, Element, SpElement, TupleElement
from streamshield.policy.privileges import Privilege
from streamshield.policy.punctuation import (
    DataDescription,
    SecurityPunctuation,
    SecurityRestriction,
    Sign,
)
from streamshield.policy.sp_patterns import Pattern


class WireFormatError(ValueError):
    """A line that is not a valid element; says which line and what is wrong."""

    def __init__(self, problem: str, line: int | None = None):
        self.problem, self.line = problem, line
        super().__init__(f"line {line}: {problem}" if line is not None else problem)


class ReservedFieldError(WireFormatError):
    """A provider sent a field only the system may set: a tuple's security ``level``
    (secure ingest assigns it from the stream's or channel's level) or a label
    (``_ss_*``). Named, so that the refusal says which field, never its value."""


RESERVED_FIELD_PREFIX = "_ss_"
LEVEL_FIELD = "level"


def reserved_field(name: str) -> bool:
    """Whether a provider-sent field name is one only the system sets."""
    lowered = name.lower()
    return lowered == LEVEL_FIELD or lowered.startswith(RESERVED_FIELD_PREFIX)


def reserved_message(where: str) -> str:
    return (
        f"{where}: a tuple's security level and labels are assigned by the system at "
        "secure ingest; a provider may not send them"
    )


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _PolicyRef(_Strict):
    ts: StrictInt = Field(gt=0)
    csn: StrictInt = Field(ge=0)


class _Ddp(_Strict):
    streams: StrictStr
    tuples: StrictStr
    attributes: StrictStr


class _Srp(_Strict):
    roles: StrictStr
    grant_option: StrictBool
    # Optional so that lines written before privileges existed keep their meaning (READ);
    # a misspelt value is an error, never READ.
    privilege: Literal["read", "statistics"] = "read"


class _Base(_Strict):
    stream: StrictStr = Field(min_length=1)
    provider: StrictStr = Field(min_length=1)
    seq: StrictInt = Field(ge=0)


class _Tuple(_Base):
    type: Literal["tuple"]
    tid: StrictInt | StrictStr
    policy: _PolicyRef
    values: dict[StrictStr, Any]


class _Sp(_Base):
    type: Literal["sp"]
    ts: StrictInt = Field(gt=0)
    sn: StrictInt = Field(ge=1)
    ddp: _Ddp
    srp: _Srp
    sign: Literal["+", "-"]
    immutable: StrictBool


_ELEMENT = TypeAdapter(Annotated[_Tuple | _Sp, Field(discriminator="type")])


_parsed_pattern = lru_cache(maxsize=16384)(parse_pattern)
"""Patterns are immutable and sps repeat their texts (``*``, a role list), while one parse
costs tens of microseconds to a millisecond (lark): secure ingest re-reads every sp of a
batch, 10k at one sp per tuple, whose role lists (1-8 of 64 roles) exceed a small cache."""
CACHED_PATTERN_CHARS = 256
"""Longer texts (tuple id lists) are parsed each time: the cache holds at most 4 MB."""


def _pattern(text: str, where: str) -> Pattern:
    try:
        if len(text) > CACHED_PATTERN_CHARS:
            return parse_pattern(text)
        return _parsed_pattern(text)
    except CqlError as err:
        # The problem names the limit or the syntax; the pattern itself is not echoed
        # (it may hold tuple ids, and an oversized one would make the message as big).
        raise WireFormatError(f"{where}: {_bounded(err.problem)}") from None


def _bounded(problem: str, limit: int = 200) -> str:
    return problem if len(problem) <= limit else problem[:limit] + "..."


def _to_element(raw: _Tuple | _Sp) -> Element:
    channel = Channel(raw.stream, raw.provider)
    if isinstance(raw, _Tuple):
        return TupleElement(channel, raw.seq, raw.tid, raw.policy.ts, raw.policy.csn, raw.values)
    return _sp_of(
        channel,
        raw.seq,
        raw.ts,
        raw.sn,
        (raw.ddp.streams, raw.ddp.tuples, raw.ddp.attributes),
        (raw.srp.roles, raw.srp.grant_option, raw.srp.privilege),
        raw.sign,
        raw.immutable,
    )


_SpFields = tuple[Channel, int, int, int, tuple[str, str, str], tuple[str, bool, str], str, bool]
"""The arguments of :func:`_sp_of`, in order."""

_BodyKey = tuple[str, str, str, str, bool, str, str, bool]
"""An sp body's fields: ddp streams, tuples, attributes; srp roles, grant option, privilege;
sign; immutable."""


def _sp_of(
    channel: Channel,
    seq: int,
    ts: int,
    sn: int,
    ddp: tuple[str, str, str],
    srp: tuple[str, bool, str],
    sign: str,
    immutable: bool,
) -> SpElement:
    """An sp from fields already checked for type and range: the one place both readers
    (the validator and :func:`parse_sp`'s fast path) build it, so the patterns' and the
    sp's own checks, and their messages, are the same for both."""
    streams, tuples, attributes = ddp
    ddp_value = DataDescription(
        streams=_pattern(streams, "ddp.streams"),
        tuples=_pattern(tuples, "ddp.tuples"),
        attributes=_pattern(attributes, "ddp.attributes"),
    )
    roles, grant_option, privilege = srp
    try:
        srp_value = SecurityRestriction(
            _pattern(roles, "srp.roles"), grant_option, Privilege(privilege)
        )
        sp = SecurityPunctuation(ddp_value, srp_value, Sign(sign), immutable, ts, sn)
    except ValueError as err:
        raise WireFormatError(str(err)) from None
    return SpElement(channel, seq, sp)


def _describe(err: _ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "element"
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"{where}: {first['msg']}{more}"


def parse_element(line: str, line_no: int | None = None) -> Element:
    """One element from one JSON line, or WireFormatError naming the line and field."""
    try:
        raw = _ELEMENT.validate_json(line)
    except _ValidationError as err:
        if any(e["type"] == "json_invalid" for e in err.errors()):
            raise WireFormatError(f"not valid JSON: {err.errors()[0]['msg']}", line_no) from None
        for error in err.errors():
            field = str(error["loc"][-1]) if error["loc"] else ""
            if error["type"] == "extra_forbidden" and reserved_field(field):
                raise ReservedFieldError(reserved_message(field), line_no) from None
        raise WireFormatError(_describe(err), line_no) from None
    try:
        return _to_element(raw)
    except WireFormatError as err:
        raise WireFormatError(err.problem, line_no) from None


_SP_KEYS = frozenset(
    ("type", "stream", "provider", "seq", "ts", "sn", "ddp", "srp", "sign", "immutable")
)
_DDP_KEYS = frozenset(("streams", "tuples", "attributes"))
_SRP_KEYS = frozenset(("roles", "grant_option"))
_SRP_KEYS_PRIVILEGE = frozenset(("roles", "grant_option", "privilege"))
_PRIVILEGES = frozenset(("read", "statistics"))


def parse_sp(line: str) -> Element:
    """One element like :func:`parse_element`, faster for the common shape of an sp.

    Secure ingest reads back every sp of a batch on the driver (at one sp per tuple,
    10k a batch). An ASCII line without escapes that ``json.loads`` reads as exactly the
    fields of an sp, each of its exact JSON type and range (``StrictInt``: no bool, no
    float; strings non-empty where required; ``privilege`` absent or a known one), is
    built without the general validator; anything else, well-formed or not, goes through
    :func:`parse_element`, so a malformed or forged sp fails with the validator's own
    error. Past the checks both paths share :func:`_sp_of`. A property test holds the
    two equal, results and errors, on random and hostile lines.
    """
    fields = _common_sp(line)
    if fields is None:
        return parse_element(line)
    return _sp_of(*fields)


def _common_sp(line: str) -> _SpFields | None:
    """The arguments of :func:`_sp_of` when ``line`` is an sp of the common shape."""
    if not line.isascii() or "\\" in line:
        return None  # escapes and non-ASCII text: the validator reads strings
    try:
        raw = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if type(raw) is not dict or raw.keys() != _SP_KEYS or raw["type"] != "sp":
        return None
    stream, provider, seq, ts, sn = (raw[k] for k in ("stream", "provider", "seq", "ts", "sn"))
    ddp, srp, sign, immutable = raw["ddp"], raw["srp"], raw["sign"], raw["immutable"]
    if not (
        _header_ok(stream, provider, seq, ts, sn)
        and type(sign) is str
        and sign in ("+", "-")
        and type(immutable) is bool
        and type(ddp) is dict
        and ddp.keys() == _DDP_KEYS
        and all(type(v) is str for v in ddp.values())
        and type(srp) is dict
        and srp.keys() in (_SRP_KEYS, _SRP_KEYS_PRIVILEGE)
        and type(srp["roles"]) is str
        and type(srp["grant_option"]) is bool
    ):
        return None
    privilege = srp.get("privilege", "read")
    if type(privilege) is not str or privilege not in _PRIVILEGES:
        return None
    return (
        Channel(stream, provider),
        seq,
        ts,
        sn,
        (ddp["streams"], ddp["tuples"], ddp["attributes"]),
        (srp["roles"], srp["grant_option"], privilege),
        sign,
        immutable,
    )


_TUPLE_KEYS = frozenset(("type", "stream", "provider", "seq", "tid", "policy", "values"))
_POLICY_KEYS = frozenset(("ts", "csn"))


def tuple_of_dict(raw: dict[str, Any], escapes: bool = True) -> TupleElement | None:
    """The tuple :func:`parse_element` reads from ``json.dumps(raw)``, built without the
    general validator when ``raw`` (as ``json.loads`` gave it) is a tuple of the common
    shape; None for anything else, which the caller hands to :func:`parse_element`.

    An append of thousands of lines would otherwise pay a dump and a validation per
    line. The common shape is exactly the fields of a tuple, each of its exact JSON type
    and range (``StrictInt``: no bool, no float), ``values`` of scalars only, every
    string valid UTF-8 (no lone surrogates) and every float finite (the rare NaN and
    infinities are left to the validator): on such input the validator accepts and
    builds the same element, and anything else it judges itself. A property test holds
    the two equal.

    ``escapes=False``: the caller read ``raw`` from text without a backslash, whose
    strings (strictly decoded UTF-8) then hold no lone surrogate: they are not checked.
    """
    if type(raw) is not dict or raw.keys() != _TUPLE_KEYS or raw["type"] != "tuple":
        return None
    stream, provider, seq = raw["stream"], raw["provider"], raw["seq"]
    tid, policy, values = raw["tid"], raw["policy"], raw["values"]
    if not (
        type(stream) is str
        and type(provider) is str
        and stream
        and provider
        and type(seq) is int
        and seq >= 0
        and (type(tid) is int or type(tid) is str)
        and type(policy) is dict
        and policy.keys() == _POLICY_KEYS
        and type(values) is dict
    ):
        return None
    ts, csn = policy["ts"], policy["csn"]
    if not (type(ts) is int and type(csn) is int and ts > 0 and csn >= 0):
        return None
    for value in values.values():
        kind = type(value)
        if kind is float:
            if not math.isfinite(value):
                return None
        elif not (kind is str or kind is int or kind is bool or value is None):
            return None
    if escapes and not all(map(_text, (stream, provider, tid, *values, *values.values()))):
        return None
    return TupleElement(interned_channel(stream, provider), seq, tid, ts, csn, values)


interned_channel = lru_cache(maxsize=4096)(Channel)
"""One Channel object per channel: the tuples of a post share it, and the look-ups by
channel (the assigner's, the landing zone's) find it by identity, comparing no fields."""


def _text(value: object) -> bool:
    """Whether a decoded JSON string is one the validator reads back as it is."""
    if type(value) is not str or value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate ("\ud800"): the validator's to judge
        return False
    return True


_BODY_LIMIT = 16_384
"""Sp bodies kept by :func:`sp_of_columns` (each a few small objects; texts longer than
:data:`CACHED_PATTERN_CHARS` are never kept)."""
_bodies: dict[_BodyKey, tuple[DataDescription, SecurityRestriction, Sign] | None] = {}


def sp_of_columns(
    stream: object,
    provider: object,
    seq: object,
    ts: object,
    sn: object,
    streams: object,
    tuples: object,
    attributes: object,
    roles: object,
    grant_option: object,
    privilege: object,
    sign: object,
    immutable: object,
) -> SecurityPunctuation | None:
    """The sp that :func:`parse_sp` reads from Spark's ``to_json`` of these fields, or None
    where it fails (any WireFormatError): secure ingest collects an sp's fields as typed
    columns rather than as JSON text, and drops an sp that does not read.

    ``to_json`` leaves a None field out, and JSON gives back exactly the strings, integers
    and booleans it was given, so the line would hold these values with the None ones
    missing: every field is required but ``privilege`` (absent: READ), each of its exact
    type and range as :func:`_common_sp` checks (the validator, which reads the lines the
    fast path does not, checks the same), and then :func:`_sp_of` builds it. A property
    test holds this equal to :func:`parse_sp` on the JSON of random and hostile fields.

    What :func:`_sp_of` derives from the body alone (the patterns, the restriction and
    the sign, or the body's failure) is kept per distinct body, keyed by its exact
    values after their types are checked (so ``True`` and ``1`` never share an entry):
    at one sp per tuple most sps re-send a body seen before.
    """
    if not _header_ok(stream, provider, seq, ts, sn):
        return None
    if privilege is None:
        privilege = "read"
    if not (
        type(streams) is str
        and type(tuples) is str
        and type(attributes) is str
        and type(roles) is str
        and type(grant_option) is bool
        and type(privilege) is str
        and type(sign) is str
        and type(immutable) is bool
    ):
        return None
    key = (streams, tuples, attributes, roles, grant_option, privilege, sign, immutable)
    try:
        body = _bodies[key]
    except KeyError:
        body = _body(key)
        if sum(map(len, key[:4])) <= CACHED_PATTERN_CHARS:
            if len(_bodies) >= _BODY_LIMIT:
                _bodies.clear()
            _bodies[key] = body
    if body is None:
        return None
    ddp, srp, sign_value = body
    try:
        return SecurityPunctuation(ddp, srp, sign_value, immutable, ts, sn)  # type: ignore[arg-type]
    except ValueError:
        return None


def _body(key: _BodyKey) -> tuple[DataDescription, SecurityRestriction, Sign] | None:
    """The parts of an sp :func:`_sp_of` builds from a body of checked types, or None
    when it would fail (its sp checks run on a probe with a valid ts and sn)."""
    streams, tuples, attributes, roles, grant_option, privilege, sign, immutable = key
    if sign not in ("+", "-") or privilege not in _PRIVILEGES:
        return None
    try:
        probe = _sp_of(
            _NOWHERE,
            0,
            1,
            1,
            (streams, tuples, attributes),
            (roles, grant_option, privilege),
            sign,
            immutable,
        ).sp
    except WireFormatError:
        return None
    return probe.ddp, probe.srp, probe.sign


def parse_lines(lines: Iterable[str]) -> Iterator[Element]:
    """Elements of a JSON-lines text; blank lines are skipped, line numbers start at 1."""
    for line_no, line in enumerate(lines, 1):
        if line.strip():
            yield parse_element(line, line_no)


def to_dict(element: Element) -> dict[str, Any]:
    base = {
        "stream": element.channel.stream,
        "provider": element.channel.provider,
        "seq": element.seq,
    }
    if isinstance(element, TupleElement):
        return {
            "type": "tuple",
            **base,
            "tid": element.tid,
            "policy": {"ts": element.policy_ts, "csn": element.policy_csn},
            "values": dict(element.values),
        }
    sp = element.sp
    return {
        "type": "sp",
        **base,
        "ts": sp.ts,
        "sn": sp.sn,
        "ddp": {
            "streams": sp.ddp.streams.text(),
            "tuples": sp.ddp.tuples.text(),
            "attributes": sp.ddp.attributes.text(),
        },
        "srp": _srp_dict(sp.srp),
        "sign": sp.sign.value,
        "immutable": sp.immutable,
    }


def _srp_dict(srp: SecurityRestriction) -> dict[str, Any]:
    """READ is written without a privilege field, as before privileges existed."""
    out: dict[str, Any] = {"roles": srp.roles.text(), "grant_option": srp.grant_option}
    if srp.privilege is not Privilege.READ:
        out["privilege"] = srp.privilege.value
    return out


_encode = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode


def to_line(element: Element) -> str:
    """One element as one JSON line (no trailing newline): sorted keys, no spaces.

    A tuple whose numbers are plain ints is written field by field (its sorted keys in
    a fixed template, one encoding of ``values``), the same text as the general path
    gives (a property test holds them equal) at a fraction of the cost: every landed
    tuple is written through here.
    """
    if (
        type(element) is TupleElement
        and type(element.seq) is int
        and type(element.policy_ts) is int
        and type(element.policy_csn) is int
        and type(element.tid) in (int, str)
        and type(element.channel.provider) is str
        and type(element.channel.stream) is str
    ):
        before_seq, before_tid = _channel_text(element.channel.provider, element.channel.stream)
        tid, values = element.tid, element.values
        return (
            f'{{"policy":{{"csn":{element.policy_csn},"ts":{element.policy_ts}}},'
            f"{before_seq}{element.seq}{before_tid}"
            f"{tid if type(tid) is int else _encode(tid)},"
            f'"type":"tuple","values":{_encode(values if type(values) is dict else dict(values))}}}'
        )
    return _encode(to_dict(element))


@lru_cache(maxsize=4096)
def _channel_text(provider: object, stream: object) -> tuple[str, str]:
    """The parts of a tuple's line around its seq that only its channel decides."""
    return f'"provider":{_encode(provider)},"seq":', f',"stream":{_encode(stream)},"tid":'


_NOWHERE = Channel("_", "_")


def sp_line(sp: SecurityPunctuation) -> str:
    """One sp alone (no channel) in the wire format, for state and registries."""
    return to_line(SpElement(_NOWHERE, 0, sp))


def sp_from_line(line: str) -> SecurityPunctuation:
    """The sp of a line written by :func:`sp_line`."""
    element = parse_element(line)
    if not isinstance(element, SpElement):
        raise WireFormatError("expected an sp")
    return element.sp


def json_schema() -> dict[str, Any]:
    """The JSON Schema of one line (a tuple or an sp), what providers validate against.

    Generated from the same pydantic models that parse the lines, so it cannot drift.
    With ``POST /streams/S/elements?assign=seq`` the server fills ``seq`` (and what
    docs/wire-format.md lists) before this schema applies.
    """
    schema = _ELEMENT.json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "streamshield wire-format element (one JSON line)"
    schema["description"] = (
        "A tuple or a security punctuation (sp) on the channel (stream, provider), ordered "
        "by seq. Sp patterns (ddp.*, srp.roles) are CQL pattern text: '*', '[120, 133]', "
        "'{ND, C}'. Unknown fields are refused; every field without a default is required."
    )
    return schema


def _header_ok(stream: Any, provider: Any, seq: Any, ts: Any, sn: Any) -> bool:
    """An sp's channel and numbers, each of its exact type and range (the fast path and
    the typed columns check them alike)."""
    return bool(
        type(stream) is str
        and type(provider) is str
        and stream
        and provider
        and type(seq) is int
        and type(ts) is int
        and type(sn) is int
        and seq >= 0
        and ts > 0
        and sn >= 1
    )

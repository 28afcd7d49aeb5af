"""Appends through the API: who may land which element, checked before the landing zone.

The landing zone validates the wire format and the schema; it does not know users.
This gate adds the object-level rules of the API, per element *kind* (paper 5,
section 5.2 "authorizing data senders", and paper 1: sps are policies):

* a tuple needs WRITE on the stream, an sp needs INJECT SP on it;
* every element must name the stream of the request path (no smuggling into a stream
  the caller may not even see);
* the element's provider must be the caller or ``<caller>.<anything>``: a channel's
  sps govern the tuples after them, so writing into another provider's channel would
  put one's tuples under that provider's policy (and one's sps over its tuples);
* a channel a connector feeds (``fed``) takes no appends through the API: its seqs are
  the broker's (a Kafka offset, an MQTT message's place), so a line landed beside them
  would take a seq a later record needs, and that record would be refused as not
  increasing or, worse, taken for a redelivery.

Rejections say which rule and which line, never a value. Lines the gate cannot parse
go on to the landing zone, which rejects them with its own (redacted) reason.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from streamshield.landing import LandingZone, Parsed
from streamshield.lang.wire import WireFormatError, parse_element
from streamshield.policy.elements import Element, SpElement


@dataclass(frozen=True)
class LineRejection:
    line: int
    reason: str
    message: str


@dataclass
class AppendReport:
    accepted: int = 0
    rejected: list[LineRejection] = field(default_factory=list)
    assigned: dict[str, int] | None = None  # provider -> last seq assigned (assign=seq)

    def as_dict(self) -> dict:
        answer = {
            "accepted": self.accepted,
            "rejected": len(self.rejected),
            "rejections": [r.__dict__ for r in self.rejected],
        }
        if self.assigned is not None:
            answer["assigned"] = self.assigned
        return answer


def owns_provider(user: str, provider: str) -> bool:
    """Whether ``user`` may write on channels of ``provider``."""
    return provider == user or provider.startswith(user + ".")


def append_checked(
    landing: LandingZone,
    user: str,
    stream: str,
    lines: Iterable[str | Parsed],
    *,
    may_write: bool,
    may_inject: bool,
    fed: frozenset[str] = frozenset(),
) -> AppendReport:
    """Lands the lines the caller may send; reports the others by line and reason.
    ``fed``: the providers of ``stream`` whose channels a connector feeds."""
    report = AppendReport()
    forwarded: list[str | Parsed] = []
    positions: list[int] = []
    for number, line in enumerate(lines, 1):
        if isinstance(line, Parsed):  # parsed already (assign=seq): only the rules
            problem = _problem(line.element, user, stream, may_write, may_inject, fed)
            checked: tuple[str, str] | str | Parsed = line if problem is None else problem
        elif not line.strip():
            continue
        else:
            checked = _checked(line, user, stream, may_write, may_inject, fed)
        if isinstance(checked, tuple):
            report.rejected.append(LineRejection(number, *checked))
        else:
            forwarded.append(checked)
            positions.append(number)
    if forwarded:
        landed = landing.append_parsed(forwarded)
        report.accepted = landed.accepted
        for rejection in landed.rejected:
            at = positions[rejection.line - 1]
            report.rejected.append(LineRejection(at, rejection.reason.value, rejection.message))
    report.rejected.sort(key=lambda r: r.line)
    return report


def _checked(
    line: str, user: str, stream: str, may_write: bool, may_inject: bool, fed: frozenset[str]
) -> tuple[str, str] | str | Parsed:
    """The line to land (parsed, or as text when it does not parse: the landing zone
    then rejects it with a redacted reason), or (reason, message) when this caller may
    not send it."""
    try:
        element = parse_element(line)
    except WireFormatError:
        return line
    problem = _problem(element, user, stream, may_write, may_inject, fed)
    return Parsed(line, element) if problem is None else problem


def _problem(
    element: Element,
    user: str,
    stream: str,
    may_write: bool,
    may_inject: bool,
    fed: frozenset[str] = frozenset(),
) -> tuple[str, str] | None:
    if element.channel.stream != stream:
        return "stream_mismatch", "the element names another stream than the request path"
    if not owns_provider(user, element.channel.provider):
        return "provider_not_yours", "provider must be your user name or start with '<user>.'"
    if element.channel.provider in fed:
        return "channel_fed_by_connector", "a connector feeds this channel: append on another"
    if isinstance(element, SpElement):
        if not may_inject:
            return "not_permitted", "INJECT SP on this stream is needed to send sps"
    elif not may_write:
        return "not_permitted", "WRITE on this stream is needed to send tuples"
    return None

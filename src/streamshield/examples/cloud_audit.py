"""The cloud-auditing example of paper 2 (section 4): MessageLog, two COI classes, Q1-Q7.

Competing companies send their audit logs to one shared auditing service; queries at a
security level read only what that level dominates (``docs/chinese-wall.md``,
"The cloud-auditing scenario"). Everything here is data, deterministic and pure (no
pyspark): the bundled CLI view (``streamshield cloud-audit``), the oracle
(:mod:`streamshield.examples.cloud_audit_oracle`) and the server test over TLS all
build on it, so they cannot drift apart.

The model, where the paper leaves it open:

* ``COI1 = {1, 2}`` (the companies using the cloud's services) and
  ``COI2 = {A, B, C}`` (the competing service providers). MessageLog is at ``[T, T]``;
  each company sends on its own channel (provider ``company1`` ... ``companyC``) at its
  own level (``[1, ⊥]``, ``[⊥, B]``, ...), so a tuple's level says whose log it is.
* A company logs the message events of its own services: the caller logs its ``send``,
  the callee its ``receive``; a failed send is logged by the caller only (the callee
  never saw it). A service invocation chain (one ``serviceId``) is a request and a
  response: caller send, callee receive, callee send, caller receive.
* Besides the chains between the classes (1-B is the paper's service 5), CompanyB calls
  its own back end (service 9) and CompanyA calls CompanyB (service 10): the service
  auditing tier (Q3, Q4) analyses COI2's own logs, so it needs sends that COI2
  companies log.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

from streamshield.policy.lattice import Lattice, Level

STREAM = "MessageLog"
SCHEMA = "message_log"
COI_CLASSES = {"COI1": ("1", "2"), "COI2": ("A", "B", "C")}
STREAM_LEVEL = "[T, T]"
ROLE = "AUDITOR"
"""The role every company's sp grants (the scenario is about levels, not roles)."""

ATTRIBUTES = (
    ("eventId", "bigint"),
    ("serviceId", "string"),
    ("msgType", "string"),
    ("sender", "string"),
    ("receiver", "string"),
    ("timestamp", "bigint"),
    ("outcome", "string"),
)
"""The paper's attributes (section 4.1) plus ``eventId``, the tuple id the wire needs."""
TID = "eventId"

COMPANIES = ("1", "2", "A", "B", "C")


def lattice() -> Lattice:
    return Lattice.of(COI_CLASSES)


def company_name(company: str) -> str:
    """How MessageLog names a company: ``Company1``, ``CompanyB``."""
    return f"Company{company}"


def provider(company: str) -> str:
    """The provider (user) sending a company's log: ``company1``, ``companyB``."""
    return f"company{company}"


def channel_level(company: str) -> str:
    """A company's channel level: its own company in its class, ``⊥`` elsewhere."""
    return lattice().format(lattice().level_of([company]), ascii=True)


@dataclass(frozen=True)
class User:
    """An auditor: her clearance is the level her session runs at."""

    name: str
    level: str
    tier: str


USERS = (
    User("auditor1", "[1, _]", "company auditing (Company1)"),
    User("session_b", "[_, B]", "service auditing (CompanyB only)"),
    User("session_coi2", "[_, T]", "service auditing (all of COI2)"),
    User("cloud_1b", "[1, B]", "cloud auditing (the 1-B chain)"),
    User("cloud_all", "[T, T]", "cloud auditing (trusted)"),
)

LOWERED_USER = "session_coi2"
LOWERED_TO = "[_, B]"
"""Between the two phases this user lowers her session from ``[⊥, T]`` to ``[⊥, B]``:
from the second phase on she receives only the rows ``[⊥, B]`` dominates, also from her
own query (which keeps running at ``[⊥, T]``)."""


@dataclass(frozen=True)
class Query:
    """One of the paper's queries as streamshield runs it, at its level."""

    name: str
    owner: str
    level: str
    text: str
    kind: str
    """``select`` (ISTREAM of a selection), ``aggregate`` (RSTREAM over a window) or
    ``join`` (ISTREAM of a windowed self-join)."""
    note: str


_SEND_B = 'msgType = "send" AND receiver = "CompanyB"'
QUERIES = (
    Query(
        "q1",
        "auditor1",
        "[1, _]",
        f'SELECT timestamp FROM MessageLog WHERE {_SEND_B} AND outcome = "success"',
        "select",
        "as in the paper",
    ),
    Query(
        "q2",
        "auditor1",
        "[1, _]",
        f'SELECT timestamp FROM MessageLog WHERE {_SEND_B} AND outcome = "failure"',
        "select",
        "as in the paper",
    ),
    Query(
        "q3",
        "session_b",
        "[_, B]",
        f'SELECT timestamp FROM MessageLog WHERE {_SEND_B} AND outcome = "failure"',
        "select",
        "as in the paper (Q2's text at [⊥, B])",
    ),
    Query(
        "q4",
        "session_coi2",
        "[_, T]",
        'SELECT timestamp FROM MessageLog WHERE msgType = "send" AND outcome = "failure" '
        'AND receiver IN ("CompanyA", "CompanyB", "CompanyC")',
        "select",
        "the paper's `receiver = B OR receiver = A OR receiver = C` without parentheses "
        "binds as `(... AND receiver = B) OR receiver = A OR ...`; written with IN as meant",
    ),
    Query(
        "q5",
        "cloud_1b",
        "[1, B]",
        "SELECT MIN(timestamp) AS first_ts, MAX(timestamp) AS last_ts FROM MessageLog [ROWS 100] "
        'WHERE outcome = "success" AND serviceId = "5"',
        "aggregate",
        "as in the paper, with aliases for the two columns",
    ),
    Query(
        "q6",
        "cloud_1b",
        "[1, B]",
        "SELECT R.timestamp - S.timestamp AS delay "
        "FROM MessageLog [ROWS 100] R JOIN MessageLog [ROWS 100] S ON S.serviceId = R.serviceId "
        'WHERE S.msgType = "send" AND S.outcome = "success" '
        'AND R.msgType = "receive" AND R.outcome = "success" '
        'AND R.receiver = "Company1" AND R.sender = "CompanyB" '
        'AND S.receiver = "CompanyB" AND S.sender = "Company1"',
        "join",
        "the paper's comma join `FROM MessageLog R[Rows 100], MessageLog S[Rows 100]` "
        "written as JOIN ... ON (a window follows the stream name; the equality is the "
        "join key)",
    ),
    Query(
        "q7",
        "cloud_all",
        "[T, T]",
        "SELECT S.serviceId AS serviceId, S.sender AS sender, R.timestamp - S.timestamp AS delay "
        "FROM MessageLog [ROWS 100] S JOIN MessageLog [ROWS 100] R ON S.serviceId = R.serviceId "
        'WHERE S.msgType = "send" AND S.outcome = "success" '
        'AND R.msgType = "receive" AND R.outcome = "success" '
        "AND R.sender = S.sender AND R.receiver = S.receiver "
        "AND R.timestamp BETWEEN S.timestamp AND S.timestamp + 50",
        "join",
        'the paper gives no text ("the delay incurred in the different service invocation '
        "chains\"); ours: each message from its send (the sender's log) to its receipt (the "
        "receiver's log), so a row's level is the LUB of two companies' levels",
    ),
)


@dataclass(frozen=True)
class Chain:
    """A service invocation chain: ``rounds`` request/response exchanges."""

    service: str
    caller: str
    callee: str
    failures: tuple[int, ...]
    """Rounds whose request fails (logged by the caller only)."""
    rounds: int = 2


CHAINS = (
    Chain("5", "1", "B", failures=(1,), rounds=3),  # the paper's service 5
    Chain("6", "2", "B", failures=(0,)),
    Chain("7", "1", "A", failures=()),
    Chain("8", "2", "C", failures=(1,)),
    Chain("9", "B", "B", failures=(0, 2), rounds=3),  # CompanyB's front end to its back end
    Chain("10", "A", "B", failures=(1,)),
)
PHASES = 2
"""Round 0 of every chain lands in phase 1, the later rounds in phase 2 (before phase 2
the :data:`LOWERED_USER` lowers her session). Rounds are 100 time units apart, so each
channel's phase-1 tuples all come before its phase-2 tuples in seq order."""


@dataclass(frozen=True)
class Event:
    """One MessageLog tuple and who logs it."""

    company: str
    phase: int
    values: dict[str, object]


def _phase(round_no: int) -> int:
    return 1 if round_no == 0 else 2


def events() -> list[Event]:
    """Every tuple of the scenario, in event time; deterministic."""
    out: list[tuple[int, Event]] = []
    for index, chain in enumerate(CHAINS):
        caller, callee = company_name(chain.caller), company_name(chain.callee)
        for round_no in range(chain.rounds):
            t0 = 1_000 + round_no * 100 + index * 7
            phase = _phase(round_no)
            failed = round_no in chain.failures
            delay = 3 + (index + round_no) % 4

            steps = [(chain.caller, t0, "send", caller, callee, not failed)]
            if not failed:
                steps += [
                    (chain.callee, t0 + 1, "receive", caller, callee, True),
                    (chain.callee, t0 + 2, "send", callee, caller, True),
                    (chain.caller, t0 + 2 + delay, "receive", callee, caller, True),
                ]
            for company, at, msg, sender, receiver, ok in steps:
                values = {
                    "serviceId": chain.service,
                    "msgType": msg,
                    "sender": sender,
                    "receiver": receiver,
                    "timestamp": at,
                    "outcome": "success" if ok else "failure",
                }
                out.append((at, Event(company, phase, values)))
    ordered = [event for _at, event in sorted(out, key=lambda pair: pair[0])]
    return [Event(e.company, e.phase, {"eventId": i, **e.values}) for i, e in enumerate(ordered, 1)]


def sp_line(company: str, seq: int, role: str = ROLE) -> str:
    """The company's policy: one sp granting ``role`` every attribute of its tuples."""
    return json.dumps(
        {
            "type": "sp",
            "stream": STREAM,
            "provider": provider(company),
            "seq": seq,
            "ts": 100,
            "sn": 1,
            "ddp": {"streams": STREAM, "tuples": "*", "attributes": "*"},
            "srp": {"roles": role, "grant_option": False},
            "sign": "+",
            "immutable": False,
        }
    )


def wire_lines(company: str, phase: int, role: str = ROLE) -> list[str]:
    """One company's lines for one phase, in the wire format with seqs (the sp first)."""
    mine = [e for e in events() if e.company == company]
    lines = [sp_line(company, 1, role)] if phase == 1 else []
    for seq, event in enumerate(mine, 2):
        if event.phase != phase:
            continue
        line = {
            "type": "tuple",
            "stream": STREAM,
            "provider": provider(company),
            "seq": seq,
            "tid": event.values[TID],
            "policy": {"ts": 100, "csn": 1},
            "values": event.values,
        }
        lines.append(json.dumps(line))
    return lines


def user(name: str) -> User:
    (found,) = (u for u in USERS if u.name == name)
    return found


def level(text: str) -> Level:
    return lattice().parse(text)


def tuples_by_level() -> Iterator[tuple[str, int]]:
    """(channel level, tuples) per company: how the log is spread over the lattice."""
    for company in COMPANIES:
        yield channel_level(company), sum(e.company == company for e in events())

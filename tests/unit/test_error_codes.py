"""The error registry (``server/error_codes.py``) is the one list of the API's error codes.

A code written in place, a string where an error body's code goes, is one that a client
cannot look up and docs/api.md does not list. These tests scan the server's source for
every place that gives a code (an :class:`ApiError` subclass's ``code``, the code
argument of one, an :class:`ErrorResponse`'s, a ``(status, code)`` pair, an
``{"error": ...}`` body) and fail on a string written there, and on a registry name
whose statuses do not include the status it is answered with; and they check the table
of codes in docs/api.md against the registry, both ways.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from streamshield.server import error_codes
from streamshield.server.error_codes import REGISTRY, ErrorCode, entry

ROOT = Path(__file__).parents[2]
SERVER = ROOT / "src" / "streamshield" / "server"
API_DOC = ROOT / "docs" / "api.md"
REGISTRY_MODULE = "streamshield.server.error_codes"


@dataclass(frozen=True)
class Finding:
    where: str
    problem: str


def _classes(trees: dict[str, ast.Module]) -> dict[str, int | None]:
    """The ApiError classes of ``trees`` (ApiError included), each with its status
    (inherited when the class sets none)."""
    defined: dict[str, tuple[list[str], int | None]] = {}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b).rpartition(".")[2] for b in node.bases]
                defined[node.name] = (bases, _assigned(node, "status"))
    family: dict[str, int | None] = {}
    changed = True
    while changed:
        changed = False
        for name, (bases, status) in defined.items():
            parent = next((b for b in bases if b in family), None)
            if name not in family and (name == "ApiError" or parent is not None):
                family[name] = status if status is not None else family.get(parent or "")
                changed = True
    return family


def _assigned(klass: ast.ClassDef, attribute: str) -> int | None:
    """The int a class body assigns to ``attribute`` (alone or in a tuple), if any."""
    for stmt in klass.body:
        for target, value in _assignments(stmt):
            if target == attribute and isinstance(value, ast.Constant):
                return value.value if isinstance(value.value, int) else None
    return None


def _assignments(stmt: ast.stmt) -> list[tuple[str, ast.expr]]:
    """``(name, value)`` of a plain or tuple assignment (``status, code = 401, X``)."""
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
        return []
    target, value = stmt.targets[0], stmt.value
    if isinstance(target, ast.Name):
        return [(target.id, value)]
    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
        return [
            (t.id, v)
            for t, v in zip(target.elts, value.elts, strict=False)
            if isinstance(t, ast.Name)
        ]
    return []


def _registry_aliases(tree: ast.Module) -> tuple[set[str], dict[str, str]]:
    """The names bound to the registry module, and names imported from it."""
    modules: set[str] = set()
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "streamshield.server":
            modules |= {a.asname or a.name for a in node.names if a.name == "error_codes"}
        elif isinstance(node, ast.ImportFrom) and node.module == REGISTRY_MODULE:
            names |= {a.asname or a.name: a.name for a in node.names}
        elif isinstance(node, ast.Import):
            modules |= {a.asname for a in node.names if a.name == REGISTRY_MODULE and a.asname}
    return modules, names


CODE_SHAPE = re.compile(r"[a-z][a-z_]*(\.[a-z_]*)?")


def findings(trees: dict[str, ast.Module]) -> list[Finding]:
    """Every code given in place, or given with a status its registry entry lacks."""
    classes = _classes(trees)
    return [f for path, tree in trees.items() for f in _file_findings(path, tree, classes)]


def _file_findings(path: str, tree: ast.Module, classes: dict[str, int | None]) -> list[Finding]:
    found: list[Finding] = []
    modules, imported = _registry_aliases(tree)

    def check(value: ast.expr | None, status: int | None, line: int) -> None:
        where = f"{path}:{line}"
        if value is None or (isinstance(value, ast.Constant) and value.value is None):
            return
        if isinstance(value, ast.IfExp):
            check(value.body, status, line)
            check(value.orelse, status, line)
            return
        if isinstance(value, ast.Constant | ast.JoinedStr):
            text = value.value if isinstance(value, ast.Constant) else _prefix(value) + "<name>"
            known = isinstance(text, str) and entry(text) is not None
            why = "a registered code" if known else "a code the registry does not list"
            found.append(Finding(where, f"{text!r} written in place ({why})"))
            return
        code = _resolved(value, modules, imported)
        if code is None:
            return  # a code passed on from elsewhere (err.code): checked where it is made
        registered = entry(code)
        if registered is None:
            found.append(Finding(where, f"{code!r} is not in the registry"))
        elif status is not None and registered.statuses and status not in registered.statuses:
            found.append(Finding(where, f"{code!r} answered with {status}: not its status"))

    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name in classes:
            for stmt in node.body:
                for target, value in _assignments(stmt):
                    if target == "code":
                        check(value, classes[node.name], stmt.lineno)
        elif isinstance(node, ast.Call):
            called = ast.unparse(node.func).rpartition(".")[2]
            keyword = next((k.value for k in node.keywords if k.arg == "code"), None)
            if called in classes:
                given = node.args[1] if len(node.args) > 1 else keyword
                check(given, classes[called], node.lineno)
            elif called == "ErrorResponse":
                given = node.args[1] if len(node.args) > 1 else keyword
                first = node.args[0] if node.args else None
                status = first.value if isinstance(first, ast.Constant) else None
                check(given, status if isinstance(status, int) else None, node.lineno)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "error":
                    check(value, None, node.lineno)
                elif _status(key) is not None and _code_like(value):  # {404: code, ...}
                    check(value, _status(key), node.lineno)
        elif isinstance(node, ast.Tuple) and len(node.elts) == 2:
            first, second = node.elts
            if _status(first) is not None and _code_like(second):  # (404, code)
                check(second, _status(first), node.lineno)
    return list(dict.fromkeys(found))  # a class's ``status, code = ...`` is also a pair


def _code_like(node: ast.expr) -> bool:
    """Whether ``node``, beside a status, is a code: a string shaped like one (not a
    message) or a name of the registry's."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and CODE_SHAPE.fullmatch(node.value) is not None
    if isinstance(node, ast.JoinedStr):
        return re.fullmatch(r"[a-z][a-z_]*\.", _prefix(node)) is not None
    return isinstance(node, ast.Attribute | ast.Name | ast.Call)


def _status(node: ast.expr | None) -> int | None:
    """The HTTP error status ``node`` is a literal of, if it is one."""
    if isinstance(node, ast.Constant) and type(node.value) is int and 400 <= node.value <= 599:
        return node.value
    return None


def _prefix(text: ast.JoinedStr) -> str:
    """The constant start of an f-string (``query_rejected.`` of ``f"query_rejected.{r}"``)."""
    first = text.values[0] if text.values else None
    return first.value if isinstance(first, ast.Constant) else ""


def _resolved(value: ast.expr, modules: set[str], imported: dict[str, str]) -> str | None:
    """The code a registry reference stands for (``codes.EXISTS``, an imported name;
    ``codes.query_rejected(...)``: its family); None for anything else."""
    called = isinstance(value, ast.Call)
    target = value.func if isinstance(value, ast.Call) else value
    name = None
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
        name = target.attr if target.value.id in modules else None
    elif isinstance(target, ast.Name):
        name = imported.get(target.id)
    if name is None:
        return None
    found = getattr(error_codes, name, None)
    if called and callable(found):
        member = entry(found("any"))
        return member.code if member is not None else name
    return found if isinstance(found, str) else name


def _server_trees() -> dict[str, ast.Module]:
    return {
        str(path.relative_to(ROOT)): ast.parse(path.read_text(encoding="utf-8"))
        for path in sorted(SERVER.rglob("*.py"))
        if path.name != "error_codes.py"
    }


def test_the_server_gives_only_registered_codes_by_their_registry_names() -> None:
    trees = _server_trees()
    assert len(_classes(trees)) >= 8  # the scan sees the ApiError classes
    assert [f"{f.where}: {f.problem}" for f in findings(trees)] == []


def test_the_scan_finds_codes_written_in_place_and_wrong_statuses() -> None:
    """The check above can fail: each way of writing a code in place is found."""
    source = """
from streamshield.server import error_codes as codes

class ApiError(Exception):
    status, code = 422, codes.INVALID

class Conflict(ApiError):
    status, code = 409, "clash"

class Gone(Conflict):
    code = codes.NOT_FOUND

def refuse():
    raise Conflict("taken", "exists")
    raise Conflict("taken", code=codes.LOGIN_BUSY)
    raise Conflict("fine", codes.EXISTS if True else None)
    return ErrorResponse(422, f"query_rejected.{rule}", "refused")
    return {"error": "made_up", "message": "no"}
    return {"NotFound": (404, "nowhere")}, (404, "not a code, a message")
    return {404: "lost", 405: codes.NOT_FOUND}
"""
    problems = [f.problem for f in findings({"x.py": ast.parse(source)})]
    assert sorted(problems) == sorted(
        [
            "'clash' written in place (a code the registry does not list)",
            "'not_found' answered with 409: not its status",
            "'exists' written in place (a registered code)",
            "'login_busy' answered with 409: not its status",
            "'query_rejected.<name>' written in place (a registered code)",
            "'made_up' written in place (a code the registry does not list)",
            "'nowhere' written in place (a code the registry does not list)",
            "'lost' written in place (a code the registry does not list)",
            "'not_found' answered with 405: not its status",
        ]
    )


def test_family_members_are_found_and_other_codes_are_not() -> None:
    assert entry("query_rejected.parse_error") is REGISTRY["query_rejected."]
    assert entry(error_codes.invalid_level("order")) is REGISTRY["invalid_level."]
    assert entry("query_rejected.") is REGISTRY["query_rejected."]  # the family itself
    assert entry("exists.more") is None  # exists is no family
    assert entry("no_such_code") is None


def test_every_code_has_a_status_and_a_meaning() -> None:
    for code in REGISTRY.values():
        assert CODE_SHAPE.fullmatch(code.code), code
        assert all(400 <= s <= 599 for s in code.statuses), code
        assert code.meaning and not code.meaning.endswith("."), code
    assert [c.code for c in REGISTRY.values() if not c.statuses] == ["http_error"]


# -- docs/api.md ----------------------------------------------------------------------------

ROW = re.compile(r"^\| `(?P<code>[^`]+)` \| (?P<status>[^|]+) \| (?P<meaning>.+) \|$")


def _documented() -> dict[str, tuple[str, str]]:
    """The rows of docs/api.md's error code table: code -> (status, meaning)."""
    rows = {}
    for line in API_DOC.read_text(encoding="utf-8").splitlines():
        match = ROW.match(line)
        if match:
            code = re.sub(r"<[a-z]+>$", "", match["code"])  # a family: its prefix
            rows[code] = (match["status"].strip(), match["meaning"].strip())
    return rows


def documented_row(code: ErrorCode) -> str:
    """The table row of ``code``, as docs/api.md writes it."""
    placeholder = {"query_rejected.": "<rule>", "invalid_level.": "<kind>"}.get(code.code, "")
    status = ", ".join(map(str, code.statuses)) or "the framework's"
    return f"| `{code.code}{placeholder}` | {status} | {code.meaning} |"


def test_the_api_doc_lists_exactly_the_registry_codes() -> None:
    expected = [documented_row(c) for c in REGISTRY.values()]
    got = _documented()
    assert sorted(got) == sorted(REGISTRY), "\n".join(["the table should read:", *expected])
    for code in REGISTRY.values():
        assert ROW.match(documented_row(code)), code
        status, meaning = got[code.code]
        assert (status, meaning) == ROW.match(documented_row(code)).group("status", "meaning"), (
            f"docs/api.md's row of {code.code} should read: {documented_row(code)}"
        )

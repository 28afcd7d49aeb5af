"""Check user SQL before Spark ever sees it (DESIGN.md section 4).

A continuous query arrives as Spark SQL text. Handing that text to ``spark.sql`` would
let a user read files (``parquet.`/etc/passwd```), call into the JVM (``reflect``,
``java_method``), change session configuration, or name raw tables instead of the
secured views. So the text is parsed here with sqlglot, checked against a deny-by-default
rule set, and only a *checked* query can be turned back into SQL: :meth:`CheckedQuery.rewrite`
regenerates the text from the checked syntax tree (comments dropped), with every stream
reference replaced by the secured view built for the user. Spark therefore only ever sees
SQL that this module produced from a tree it has inspected.

Every rejection is a :class:`QueryRejected` whose ``rule`` names the broken rule and whose
message is safe to show the user: it names relations and functions, never literal values
from the query (they may be data the user typed from elsewhere, and messages end up in
logs and other users' tooling).

The module is pure Python: it must not import pyspark (tests/unit/test_purity.py).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError, SqlglotError, TokenError
from sqlglot.tokens import Token, TokenType

from streamshield.lang.number_bounds import number_problem

__all__ = [
    "ALLOWED_UNKNOWN_FUNCTIONS",
    "FORBIDDEN_FUNCTIONS",
    "FORBIDDEN_FUNCTION_PREFIXES",
    "MAX_EXPANSION",
    "MAX_QUERY_CHARS",
    "MAX_REGEX_CHARS",
    "CheckedQuery",
    "QueryRejected",
    "bind_views",
    "check_query",
    "check_reads_only",
    "parse_tree",
]

MAX_QUERY_CHARS = 100_000
"""Longer texts are refused before parsing: no legitimate continuous query is this big and
the parser's time and memory grow with the input."""

MAX_REGEX_CHARS = 256
"""Longest regular expression or LIKE pattern a query may contain (see :func:`_check_regexes`)."""

MAX_EXPANSION = 10_000
"""Largest count, length or width a size-amplifying function may be given (see
:func:`_check_expansion`): ``repeat``'s count, the length of ``lpad``/``rpad``/``space``/
``randstr``, ``array_repeat``'s count, the number of elements of ``sequence``, a width or
precision in a ``printf``/``format_string`` format and ``format_number``'s decimals."""

_REGEX_ARGS: dict[str, tuple[str, ...]] = {
    name: args
    for name, args in (
        ("RegexpLike", ("expression",)),
        ("RegexpILike", ("expression",)),
        ("RegexpExtract", ("expression",)),
        ("RegexpExtractAll", ("expression",)),
        ("RegexpReplace", ("expression",)),
        ("RegexpCount", ("expression",)),
        ("RegexpInstr", ("expression",)),
        ("RegexpSubstr", ("expression",)),
        ("RegexpSplit", ("expression",)),
        ("StrToMap", ("pair_delim", "key_value_delim")),
        ("ParseUrl", ("key",)),  # Spark builds "(&|^)" + key + "=([^&]*)" as a regex
    )
}
"""sqlglot nodes whose named arguments Spark compiles as a Java regular expression."""
_REGEX_ANONYMOUS = {"regexp": (1,), "rlike": (1,), "try_parse_url": (2,)}
"""The same for functions sqlglot does not model: positions of the regex arguments."""
_REGEX_OPERATORS = frozenset("*+?{}()|[]")
"""Java regex syntax that repeats, groups, alternates or opens a class. Without these a
regex is a fixed sequence of literals, ``.``, ``^`` and ``$``: it matches in time linear
in the value (times its own length), never by backtracking."""

TIME_WINDOW_FUNCTIONS = frozenset({"window", "session_window"})
"""Spark's streaming time-window functions; each one adds windowed state, so they are counted."""

FORBIDDEN_FUNCTIONS = frozenset(
    {
        # reach into the JVM: call arbitrary static Java methods
        "reflect",
        "java_method",
        "try_reflect",
        # reveal the host: file names and blocks the rows came from
        "input_file_name",
        "input_file_block_start",
        "input_file_block_length",
        # reveal the service's identity and session, not the user's data
        "current_user",
        "user",
        "session_user",
        "current_catalog",
        "current_database",
        "current_schema",
        "current_path",
        "current_metastore",
        "current_recipient",
        "is_member",
        "is_account_group_member",
        "version",
        "spark_partition_id",
        # fail the query on purpose or with a chosen message: a side channel and a DoS lever
        "assert_true",
        "raise_error",
        # read storage or catalogs from inside a query
        "read_files",
        "range",
        "sql_keywords",
        "collations",
        "python_worker_logs",
        "from_protobuf",  # its descriptor-file argument reads a path on the driver
        "to_protobuf",
        # crypto with caller-chosen keys and service secrets
        "aes_decrypt",
        "try_aes_decrypt",
        "aes_encrypt",
        "secret",
        "try_secret",
    }
)
"""Functions refused wherever they appear, whether sqlglot knows them or not."""

FORBIDDEN_FUNCTION_PREFIXES = ("java_", "reflect", "read_")
"""Name prefixes refused too, so a future ``java_*``, ``reflect*`` or ``read_*`` built-in
(or another dialect's ``read_csv``, ``read_parquet`` that sqlglot models) is denied."""

ALLOWED_UNKNOWN_FUNCTIONS = frozenset(
    {
        # time windows
        "window",
        "session_window",
        "window_time",
        # date and time
        "date_format",
        "from_unixtime",
        "to_timestamp",
        "to_timestamp_ltz",
        "to_timestamp_ntz",
        "try_to_timestamp",
        "try_to_date",
        "to_date",
        "date_add",
        "date_sub",
        "datediff",
        "date_diff",
        "date_part",
        "datepart",
        "date_trunc",
        "hour",
        "minute",
        "second",
        "year",
        "month",
        "day",
        "dayofweek",
        "dayofmonth",
        "dayofyear",
        "weekday",
        "weekofyear",
        "quarter",
        "unix_timestamp",
        "unix_seconds",
        "unix_millis",
        "unix_micros",
        "unix_nanos",
        "timestamp_seconds",
        "timestamp_millis",
        "timestamp_micros",
        "timestamp_nanos",
        "current_timestamp",
        "current_date",
        "current_timezone",
        "now",
        "make_date",
        "make_timestamp",
        "make_timestamp_ltz",
        "make_timestamp_ntz",
        "try_make_timestamp",
        "try_make_timestamp_ltz",
        "try_make_timestamp_ntz",
        "make_interval",
        "try_make_interval",
        "make_dt_interval",
        "make_ym_interval",
        "from_utc_timestamp",
        "to_utc_timestamp",
        "time_bucket",
        # aggregates
        "approx_count_distinct",
        "percentile_approx",
        "approx_percentile",
        "collect_list",
        "collect_set",
        "bit_and",
        "bit_or",
        "bit_xor",
        "bool_and",
        "bool_or",
        "every",
        "some",
        "any_value",
        "count_if",
        "mean",
        "std",
        "try_sum",
        "try_avg",
        "histogram_numeric",
        "count_min_sketch",
        "hll_sketch_agg",
        "hll_sketch_estimate",
        "hll_union",
        "hll_union_agg",
        # arithmetic
        "try_add",
        "try_divide",
        "try_multiply",
        "try_subtract",
        "try_mod",
        "pmod",
        "positive",
        "round",
        "bround",
        "abs",
        "sqrt",
        "pow",
        "power",
        "exp",
        "expm1",
        "ln",
        "log",
        "log10",
        "log1p",
        "floor",
        "ceil",
        "e",
        "hypot",
        "bin",
        "conv",
        "shiftrightunsigned",
        "nullifzero",
        "zeroifnull",
        # null handling and conditionals
        "nvl",
        "nvl2",
        "ifnull",
        "nullif",
        "coalesce",
        "greatest",
        "least",
        "isnull",
        "isnotnull",
        # strings
        "concat",
        "concat_ws",
        "substring",
        "upper",
        "lower",
        "length",
        "octet_length",
        "trim",
        "btrim",
        "regexp",
        "regexp_extract",
        "regexp_replace",
        "format_number",
        "printf",
        "find_in_set",
        "sentences",
        "mask",
        "quote",
        "to_varchar",
        "url_decode",
        "url_encode",
        "try_url_decode",
        "try_parse_url",
        "luhn_check",
        "jaro_winkler_similarity",
        "is_valid_utf8",
        "make_valid_utf8",
        "validate_utf8",
        "try_validate_utf8",
        # hashing (keyed by the caller, no service secret involved)
        "hash",
        "xxhash64",
        "crc32",
        "hmac",
        # casts written as functions
        "bigint",
        "binary",
        "decimal",
        "smallint",
        "tinyint",
        "try_to_binary",
        "try_to_number",
        # structs, arrays and maps
        "struct",
        "named_struct",
        "array",
        "map",
        "element_at",
        "get",
        "size",
        "cardinality",
        "array_contains",
        "array_repeat",
        "array_union",
        "arrays_overlap",
        "forall",
        "zip_with",
        "map_concat",
        "map_entries",
        "map_filter",
        "map_values",
        "map_zip_with",
        "transform_keys",
        "transform_values",
        "json_array_length",
        "json_tuple",
        "inline_outer",
        "from_csv",
        "to_csv",
        "schema_of_csv",
        "schema_of_json",
        "from_avro",
        "to_avro",
        # variants
        "try_parse_json",
        "variant_get",
        "try_variant_get",
        "is_variant_null",
        "schema_of_variant",
        "to_variant_object",
        # ids
        "monotonically_increasing_id",
        "uuid",
    }
)
"""Functions sqlglot does not model (it parses them as ``exp.Anonymous``) that users may call.

Unknown function names are refused unless listed here, so a user-defined or newly added
Spark function is denied until someone decides it is safe. Names sqlglot does model are
allowed unless :data:`FORBIDDEN_FUNCTIONS` or :data:`FORBIDDEN_FUNCTION_PREFIXES` deny them.
Deliberately absent: XML/XPath parsing (XML parsers have a history of entity attacks),
protobuf (reads descriptor files), and everything in :data:`FORBIDDEN_FUNCTIONS`."""

FILE_FORMATS = frozenset(
    {
        "parquet",
        "json",
        "csv",
        "delta",
        "text",
        "orc",
        "binaryfile",
        "avro",
        "xml",
        "jdbc",
        "libsvm",
        "image",
        "hudi",
        "iceberg",
    }
)
"""Data-source names Spark accepts in ``format.`path``` to read files as a relation."""

_STATEMENT_NODES: tuple[type[exp.Expr], ...] = tuple(
    node
    for node in (
        getattr(exp, name, None)
        for name in (
            "Insert",
            "MultitableInserts",
            "Update",
            "Delete",
            "Merge",
            "Create",
            "Drop",
            "Alter",
            "Command",
            "Set",
            "Use",
            "Cache",
            "Uncache",
            "Refresh",
            "Describe",
            "Analyze",
            "Show",
            "LoadData",
            "Copy",
            "Pragma",
            "Transaction",
            "Commit",
            "Rollback",
            "Into",
        )
    )
    if isinstance(node, type)
)
"""Nodes that write, change the catalog or the session, or are not queries at all. Refused
anywhere in the tree, not only at the top, so nesting cannot smuggle one in."""

_LITERAL_TOKENS = frozenset(
    getattr(TokenType, name)
    for name in (
        "STRING",
        "NUMBER",
        "BIT_STRING",
        "HEX_STRING",
        "BYTE_STRING",
        "NATIONAL_STRING",
        "NATIONAL_RAW_STRING",
        "RAW_STRING",
        "HEREDOC_STRING",
        "UNICODE_STRING",
    )
    if hasattr(TokenType, name)
)
_GENERIC_MESSAGES = {
    "unknown_relation": "the query reads a relation that is not one of your streams",
    "file_path": "reading files directly (format.`path`) is not allowed; query a stream",
    "table_function": "functions in FROM (table-valued functions) are not allowed",
    "forbidden_function": "the query calls a function that is not allowed",
    "duplicate_cte": "a CTE name is defined twice",
    "parse_error": "could not parse the query",
}
"""Messages without any name, used when a name to be shown contains a literal of the query
(sqlglot accepts ``FROM '...'`` and ``WITH '...' AS``, turning strings into names)."""

_VIEW_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}")
_STREAM_META = "streamshield_stream"
_SHOWN_NAME_CHARS = 64


class QueryRejected(ValueError):
    """A user query that breaks a rule; the message is safe to show to that user.

    ``rule`` is a short machine-readable code (``not_select``, ``unknown_relation``,
    ``file_path``, ``table_function``, ``forbidden_function``, ``config``, ``hint``,
    ``parse_error``, ``multiple_statements``, ``too_many_joins``, ``too_many_windows``,
    ``regex``, ``expansion``, ``substitution``, ``reserved_name``, ``star``,
    ``script_transform``, ``recursive_cte``, ``duplicate_cte``, ``too_long``,
    ``too_complex``). The message names the rule and at most a relation or function name;
    it never contains literal values from the query.
    """

    def __init__(
        self, rule: str, message: str, *, line: int | None = None, column: int | None = None
    ) -> None:
        self.rule = rule
        self.message = message
        self.line = line
        self.column = column
        super().__init__(f"query rejected ({rule}): {message}")


@dataclass(frozen=True)
class CheckedQuery:
    """A query that passed :func:`check_query`; the only thing :meth:`rewrite` accepts.

    Keeping the checked syntax tree (not just the text) means the SQL handed to Spark is
    generated from exactly what was inspected, rather than re-parsed by a second parser
    that might read the text differently.
    """

    sql: str
    """The original text, as the user wrote it (for the audit log)."""
    streams: tuple[str, ...]
    """Catalog streams the query reads, spelled as in the catalog, sorted and unique."""
    _tree: exp.Expr = field(repr=False, compare=False)

    @property
    def tree(self) -> exp.Expr:
        """The checked syntax tree (shared: copy it before changing anything)."""
        return self._tree

    def rewrite(self, view_names: Mapping[str, str]) -> str:
        """The query with every stream reference replaced by the given (secured) view name,
        as Spark SQL (see :func:`bind_views`)."""
        tree = bind_views(self._tree, self.streams, view_names)
        lookup = {name.lower(): view for name, view in view_names.items()}
        check_reads_only(tree, {lookup[s.lower()] for s in self.streams})
        return tree.sql(dialect="spark")


def bind_views(tree: exp.Expr, streams: Collection[str], view_names: Mapping[str, str]) -> exp.Expr:
    """A copy of a checked ``tree`` (or of one our rewrites grew from it) with every stream
    reference replaced by the given (secured) view name.

    ``view_names`` maps each of ``streams`` (matched case-insensitively) to the temp view
    that applies the user's policy. References keep their alias; an unaliased
    ``FROM HeartRate`` becomes ``FROM `view` AS HeartRate`` so column qualifiers such as
    ``HeartRate.beats`` still resolve. CTE references are left alone, comments dropped.
    The whole secured tree is checked to read exactly its views once every rewrite ran
    (:func:`check_reads_only`, from ``rewrite_rules.secure``).

    Raises ``ValueError`` if a stream has no view, a view name is not a plain identifier,
    or a CTE in the query has the same name as a view (it would shadow the view).
    """
    lookup = {name.lower(): view for name, view in view_names.items()}
    missing = [s for s in streams if s.lower() not in lookup]
    if missing:
        raise ValueError(f"no view given for streams {missing}")
    used = {lookup[s.lower()] for s in streams}
    for view in used:
        if not _VIEW_NAME.fullmatch(view):
            raise ValueError(f"view name {view!r} is not a plain identifier")
    used_lower = {v.lower() for v in used}
    tree = tree.copy()
    for node in tree.walk():  # comments never reach Spark, whichever rendering is used
        node.comments = None
    for cte in tree.find_all(exp.CTE):
        if cte.alias_or_name.lower() in used_lower:
            raise ValueError(f"CTE {cte.alias_or_name!r} would shadow a secured view")
    for table in list(tree.find_all(exp.Table)):
        stream = table.meta.get(_STREAM_META)
        if stream is None:
            continue
        written = table.this.copy()
        alias = table.args.get("alias")
        if alias is None:
            table.set("alias", exp.TableAlias(this=written))
        elif alias.this is None:
            alias.set("this", written)
        table.set("this", exp.to_identifier(lookup[stream.lower()], quoted=True))
        table.set("db", None)
        table.set("catalog", None)
    for func in tree.find_all(exp.Anonymous):
        # ``WINDOW`` is also a clause keyword; backquoted, every parser reads it as the
        # function (Spark resolves quoted function names as usual).
        if func.name.lower() == "window":
            func.set("this", exp.to_identifier(func.name, quoted=True))
    return tree


def check_reads_only(tree: exp.Expr, views: Collection[str]) -> None:
    """RuntimeError unless ``tree`` reads exactly ``views`` (and CTEs in scope), through
    named relations only: the last check on a secured tree before it is rendered for
    Spark, after every rewrite (none may add a read of anything else). It runs on the
    tree itself, resolving names as :func:`check_query` does, rather than on a rendering
    parsed again: the rendering is what Spark parses, once."""
    marked = tree.copy()  # resolving marks table references
    try:
        _check_relations(marked)
        found = _resolve_tables(marked, _catalog(views), "")
    except QueryRejected as err:
        raise RuntimeError(f"the secured query reads other relations ({err.rule})") from None
    if {s.lower() for s in found} != {v.lower() for v in views}:
        raise RuntimeError("the secured query reads other relations than its views")


def check_query(
    sql: str, streams: Collection[str], max_joins: int = 4, *, max_windows: int = 4
) -> CheckedQuery:
    """Parse ``sql`` (Spark dialect) and return it checked, or raise :class:`QueryRejected`.

    ``streams`` is the catalog of streams this user may read; names match
    case-insensitively, as Spark's default resolution does. Rules (deny by default):
    exactly one statement, and it is a query; every relation is a catalog stream or a CTE
    in scope; no file paths, table-valued functions or LATERAL VIEW; no forbidden or unknown
    functions; no hints, no configuration changes, no script transforms; at most
    ``max_joins`` joins and ``max_windows`` time-window calls.
    """
    if isinstance(streams, str):
        raise TypeError("streams must be a collection of names, not one string")
    catalog = _catalog(streams)
    if len(sql) > MAX_QUERY_CHARS:
        raise QueryRejected("too_long", f"the query is longer than {MAX_QUERY_CHARS} characters")
    if "${" in sql:
        # Spark substitutes ${env:X}, ${system:X}, ${conf} in SQL text before it parses it,
        # inside string literals and names alike: the server's secrets and settings.
        raise QueryRejected(
            "substitution", "'${' is not allowed: Spark would replace it with server settings"
        )
    literals: frozenset[str] = frozenset()
    try:
        tree, literals = _parse_one(sql)
        _check_shape(tree)
        _check_relations(tree)
        _check_functions(tree)
        _check_regexes(tree)
        _check_expansion(tree)
        _check_numbers(tree)
        _check_reserved_names(tree)
        _check_stars(tree)
        found = _resolve_tables(tree, catalog, sql)
        _check_limits(tree, max_joins, max_windows)
    except RecursionError:
        # sqlglot parses recursively (some 20 frames per nesting level), so expressions
        # nested more than about 40 deep exhaust Python's default limit: deny, not crash.
        raise QueryRejected("too_complex", "the query is nested too deeply") from None
    except QueryRejected as error:
        raise _scrubbed(error, literals) from None
    return CheckedQuery(sql=sql, streams=tuple(sorted(found)), _tree=tree)


def parse_tree(sql: str) -> exp.Expr:
    """The one statement of ``sql`` as a sqlglot tree, read by the same token rules as
    :func:`check_query` (statement splitting, SET/RESET, hints, ``window(`` calls).

    For planning a query's shape only: it does not check relations or functions, so a
    query must still pass :func:`check_query` before Spark sees it.
    """
    if len(sql) > MAX_QUERY_CHARS:
        raise QueryRejected("too_long", f"the query is longer than {MAX_QUERY_CHARS} characters")
    if "${" in sql:
        # Spark substitutes ${env:X}, ${system:X}, ${conf} in SQL text before it parses it,
        # inside string literals and names alike: the server's secrets and settings.
        raise QueryRejected(
            "substitution", "'${' is not allowed: Spark would replace it with server settings"
        )
    try:
        return _parse_one(sql)[0]
    except RecursionError:
        raise QueryRejected("too_complex", "the query is nested too deeply") from None


def _scrubbed(error: QueryRejected, literals: frozenset[str]) -> QueryRejected:
    """The error, or a name-free copy if its message happens to contain a query literal.

    A backstop for rule 8: names shown in messages come from identifiers, but sqlglot
    accepts some strings where names go, and a name may simply equal a literal.
    """
    text = error.message.lower()
    if not any(literal.lower() in text for literal in literals):
        return error
    message = _GENERIC_MESSAGES.get(error.rule, "the query breaks a rule")
    return QueryRejected(error.rule, message, line=error.line, column=error.column)


def _catalog(streams: Collection[str]) -> dict[str, str]:
    """Lower-cased name -> catalog name; two streams differing only in case are ambiguous."""
    catalog: dict[str, str] = {}
    for name in streams:
        if not isinstance(name, str) or not name:
            raise ValueError(f"stream names must be non-empty strings, got {name!r}")
        other = catalog.setdefault(name.lower(), name)
        if other != name:
            raise ValueError(f"streams {other!r} and {name!r} differ only in case")
    return catalog


def _shown(name: str) -> str:
    """A relation or function name fit for a message: printable and short."""
    clean = "".join(c if c.isprintable() else "?" for c in name)
    if len(clean) > _SHOWN_NAME_CHARS:
        clean = clean[:_SHOWN_NAME_CHARS] + "..."
    return repr(clean)


def _parse_one(sql: str) -> tuple[exp.Expr, frozenset[str]]:
    """Tokenize, enforce the statement-level rules on tokens, then parse the one statement.

    Statement splitting, ``SET``/``RESET`` and hints are decided on tokens because sqlglot
    cannot parse every such statement (``RESET key`` is a parse error) and because it keeps
    a misplaced hint only as an ordinary comment. Also returns the texts of the literals
    (two characters or more), which messages must not contain.
    """
    dialect = Spark()
    try:
        tokens = dialect.tokenize(sql)
    except TokenError:
        raise QueryRejected(
            "parse_error",
            "could not read the query: unterminated string, quoted name or comment?",
        ) from None
    literals = frozenset(
        token.text
        for token in tokens
        if token.token_type in _LITERAL_TOKENS and len(token.text.strip()) >= 2
    )
    statements: list[list[Token]] = [[]]
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            statements.append([])
        else:
            statements[-1].append(token)
    statements = [s for s in statements if s]
    if not statements:
        raise QueryRejected("parse_error", "the query is empty")
    try:
        return _parse_statements(sql, dialect, statements), literals
    except QueryRejected as error:
        raise _scrubbed(error, literals) from None


def _parse_statements(sql: str, dialect: Spark, statements: list[list[Token]]) -> exp.Expr:
    for statement in statements:
        first = statement[0]
        if first.token_type == TokenType.SET or first.text.upper() == "RESET":
            raise QueryRejected(
                "config", "changing the session configuration (SET/RESET) is not allowed"
            )
    if len(statements) > 1:
        raise QueryRejected(
            "multiple_statements", f"exactly one statement is allowed, found {len(statements)}"
        )
    (statement,) = statements
    if _has_hint(sql, statement):
        raise QueryRejected("hint", "optimizer hints (/*+ ... */) are not allowed")
    _check_first_word(sql, statement)
    statement = _window_calls_as_functions(statement)
    try:
        parsed = dialect.parser().parse(statement, sql)
    except ParseError as error:
        where = error.errors[0] if error.errors else {}
        raise _unparsed(sql, statement, where.get("line"), where.get("col")) from None
    except (SqlglotError, ValueError, TypeError, AttributeError, IndexError, KeyError):
        raise QueryRejected("parse_error", "could not parse the query") from None
    trees = [t for t in parsed if t is not None]
    if len(trees) != 1:
        raise QueryRejected("parse_error", "could not parse the query")
    return trees[0]


def _check_first_word(sql: str, statement: list[Token]) -> None:
    """A statement opening with a name is a misspelt keyword (``SELEC``): said at that
    word, where sqlglot would only notice it tokens later (at ``FROM``)."""
    first = statement[0]
    if first.token_type is TokenType.VAR:
        line, column = _token_position(sql, first)
        raise QueryRejected(
            "parse_error",
            f"could not parse the query at line {line}, column {column}: a query starts "
            f"with SELECT (or WITH), not {_shown(first.text)}",
            line=line,
            column=column,
        )


def _unparsed(sql: str, tokens: list[Token], line: int | None, end: int | None) -> QueryRejected:
    """A parse error at the first character of the token sqlglot stopped at (sqlglot's
    column is the token's last character), naming the token when it is a keyword or
    a symbol (never a literal or a name: those are the user's words)."""
    if line is None:
        return QueryRejected("parse_error", "could not parse the query")
    token = next((t for t in tokens if t.line == line and t.col == end), None)
    if token is None:
        return QueryRejected("parse_error", f"could not parse the query at line {line}", line=line)
    line, column = _token_position(sql, token)
    kinds = (TokenType.VAR, TokenType.STRING, TokenType.NUMBER, TokenType.IDENTIFIER)
    near = "" if token.token_type in kinds else f" near {token.text[:20]!r}"
    return QueryRejected(
        "parse_error",
        f"could not parse the query at line {line}, column {column}{near}",
        line=line,
        column=column,
    )


def _token_position(sql: str, token: Token) -> tuple[int, int]:
    """1-based line and column of the token's first character."""
    line = sql.count("\n", 0, token.start) + 1
    return line, token.start - (sql.rfind("\n", 0, token.start) + 1) + 1


def _has_hint(sql: str, tokens: list[Token]) -> bool:
    """Whether a ``/*+`` comment sits anywhere between (or around) the tokens.

    Only the gaps between tokens are searched, so ``'/*+'`` inside a string is not a hint.
    """
    if any(token.token_type == TokenType.HINT for token in tokens):
        return True
    edges = [-1] + [b for t in tokens for b in (t.start, t.end)] + [len(sql)]
    gaps = (sql[edges[i] + 1 : edges[i + 1]] for i in range(0, len(edges), 2))
    return any("/*+" in gap for gap in gaps)


def _window_calls_as_functions(tokens: list[Token]) -> list[Token]:
    """Make ``window(`` a function call: sqlglot reads ``GROUP BY window(...)`` as the
    WINDOW clause and fails. ``WINDOW`` followed by ``(`` is never the clause
    (that is ``WINDOW name AS (...)``), so retyping it as a plain name is safe."""
    fixed = list(tokens)
    for i, token in enumerate(tokens[:-1]):
        if token.token_type == TokenType.WINDOW and tokens[i + 1].token_type == TokenType.L_PAREN:
            fixed[i] = Token(
                TokenType.VAR,
                token.text,
                token.line,
                token.col,
                token.start,
                token.end,
                token.comments,
            )
    return fixed


def _statement_kind(node: exp.Expr) -> str:
    """A keyword naming a statement for messages, never user text beyond a keyword."""
    if isinstance(node, exp.Command):
        words = str(node.this or "").split()
        return words[0].upper() if words and _WORD.fullmatch(words[0]) else "command"
    if isinstance(node, _STATEMENT_NODES):
        return type(node).key.upper()
    return "this kind of statement"


def _check_shape(tree: exp.Expr) -> None:
    """One query at the top; no statements, INTO, script transforms or hints inside it."""
    root = tree
    while isinstance(root, exp.Subquery):
        root = root.this
    if not isinstance(root, exp.Select | exp.SetOperation):
        raise QueryRejected(
            "not_select",
            f"only queries (SELECT, WITH, UNION ...) are allowed, not {_statement_kind(tree)}",
        )
    for node in tree.walk():
        if isinstance(node, _STATEMENT_NODES):
            raise QueryRejected(
                "not_select",
                f"only queries are allowed; {_statement_kind(node)} found inside the query",
            )
        if isinstance(node, exp.QueryTransform):
            raise QueryRejected(
                "script_transform", "TRANSFORM ... USING (running a script) is not allowed"
            )
        if isinstance(node, exp.Hint):
            raise QueryRejected("hint", "optimizer hints (/*+ ... */) are not allowed")
        if isinstance(node, exp.Select) and not node.expressions:
            raise QueryRejected("parse_error", "a SELECT has nothing to select")
        if isinstance(node, exp.With) and node.args.get("recursive"):
            raise QueryRejected("recursive_cte", "WITH RECURSIVE is not allowed")


def _check_relations(tree: exp.Expr) -> None:
    """Everything in FROM/JOIN is a named relation, a subquery or inline VALUES.

    Table-valued functions (``range``, ``read_files``, ``explode`` ...), ``TABLE(...)``,
    ``IDENTIFIER(...)`` and LATERAL VIEW all produce relations from expressions, so the
    safe choice is to refuse every function call in FROM rather than judge each one.
    """
    for node in tree.walk():
        if isinstance(node, exp.Lateral):
            if node.args.get("view") or not isinstance(node.this, exp.Subquery):
                raise QueryRejected(
                    "table_function", "LATERAL VIEW and functions in FROM are not allowed"
                )
        elif isinstance(node, exp.From | exp.Join):
            relation = node.this
            if isinstance(relation, exp.Table) and isinstance(relation.this, exp.Identifier):
                continue
            if isinstance(relation, exp.Subquery | exp.Values | exp.Lateral):
                continue
            raise QueryRejected("table_function", _table_function_message(relation))
        elif isinstance(node, exp.Table) and not isinstance(node.this, exp.Identifier):
            raise QueryRejected("table_function", _table_function_message(node))


def _table_function_message(relation: exp.Expr) -> str:
    inner = relation.this if isinstance(relation, exp.Table) else relation
    if isinstance(inner, exp.Func):
        return f"table-valued function {_shown(_func_name(inner))} in FROM is not allowed"
    return "only streams, CTEs and subqueries may appear in FROM"


def _func_name(node: exp.Func) -> str:
    if isinstance(node, exp.Anonymous | exp.AnonymousAggFunc):
        return node.name
    return node.sql_name().lower()


def _func_names(node: exp.Func) -> set[str]:
    """Every name a function node can go by: what the user wrote for unknown functions;
    for modelled ones all of sqlglot's spellings, so ``current_user`` is caught however
    it was written (``CURRENT_USER``, ``current_user()``)."""
    if isinstance(node, exp.Anonymous | exp.AnonymousAggFunc):
        return {node.name.lower()}
    return {name.lower() for name in type(node).sql_names()} | {type(node).key.lower()}


def _check_functions(tree: exp.Expr) -> None:
    """Forbidden names anywhere; unknown names only if allow-listed; no qualified calls."""
    for node in tree.walk():
        if not isinstance(node, exp.Func):
            continue
        names = _func_names(node)
        shown = _shown(_func_name(node))
        if names & FORBIDDEN_FUNCTIONS or any(
            name.startswith(FORBIDDEN_FUNCTION_PREFIXES) for name in names
        ):
            raise QueryRejected("forbidden_function", f"function {shown} is not allowed")
        if isinstance(node, exp.Anonymous | exp.AnonymousAggFunc) and not (
            names <= ALLOWED_UNKNOWN_FUNCTIONS
        ):
            raise QueryRejected("forbidden_function", f"function {shown} is unknown or not allowed")
        parent = node.parent
        if isinstance(parent, exp.Dot) and parent.expression is node:
            # ``db.f(x)`` calls a persistent function, ``system.builtin.f`` a built-in by
            # another name; neither is needed and both dodge the name checks.
            raise QueryRejected(
                "forbidden_function", f"qualified function name for {shown} is not allowed"
            )


def _check_regexes(tree: exp.Expr) -> None:
    """Every text Spark compiles as a Java regex is a short literal that cannot backtrack.

    Java's regex engine backtracks: ``(a+)+b``, ``(.*a){20}`` or ``%a%a%a%a%b`` take time
    exponential or polynomial in the value, and deep patterns overflow the JVM stack of the
    stream thread. The value is tenant data, so the pattern must be safe for *any* value:
    regex arguments (RLIKE, ``regexp_*``, ``split``, ``str_to_map``, ``parse_url``'s key)
    must be string literals of at most :data:`MAX_REGEX_CHARS` characters without
    repetition, groups, alternation or classes; a LIKE/ILIKE pattern (Spark turns it into
    a regex with ``.*`` for ``%``) must be a literal with at most one ``%`` before its
    trailing ones, or of the form ``%text%``. ESCAPE and SIMILAR TO are refused.
    """
    for node in tree.walk():
        if isinstance(node, exp.SimilarTo | exp.Escape):
            raise QueryRejected("regex", "SIMILAR TO and LIKE ... ESCAPE are not allowed")
        if isinstance(node, exp.Like | exp.ILike):
            shown = "ILIKE" if isinstance(node, exp.ILike) else "LIKE"
            pattern = node.expression
            choices = (
                pattern.expressions or [pattern.this]
                if isinstance(pattern, exp.Any | exp.All)
                else [pattern]
            )
            for choice in _flatten_tuples(choices):
                _check_like_pattern(choice, shown)
            continue
        name = type(node).__name__
        arguments: list[exp.Expr | None] = []
        if name in _REGEX_ARGS:
            arguments = [node.args.get(arg) for arg in _REGEX_ARGS[name]]
            shown = _shown(_func_name(node))  # type: ignore[arg-type]
        elif isinstance(node, exp.Anonymous) and node.name.lower() in _REGEX_ANONYMOUS:
            given = node.expressions
            positions = _REGEX_ANONYMOUS[node.name.lower()]
            arguments = [given[i] if i < len(given) else None for i in positions]
            shown = _shown(node.name)
        for argument in arguments:
            if argument is not None:
                _check_regex_literal(argument, shown)


def _flatten_tuples(choices: list[exp.Expr]) -> Iterator[exp.Expr]:
    for choice in choices:
        if isinstance(choice, exp.Tuple | exp.Paren):
            yield from _flatten_tuples(list(choice.iter_expressions()))
        else:
            yield choice


def _literal_text(node: exp.Expr, shown: str) -> str:
    if not (isinstance(node, exp.Literal) and node.is_string):
        raise QueryRejected(
            "regex", f"the pattern of {shown} must be a string literal, not an expression"
        )
    text: str = node.this
    if len(text) > MAX_REGEX_CHARS:
        raise QueryRejected(
            "regex", f"the pattern of {shown} is longer than {MAX_REGEX_CHARS} characters"
        )
    return text


def _check_regex_literal(node: exp.Expr, shown: str) -> None:
    text = _literal_text(node, shown)
    escaped = False
    for char in text:
        if escaped:
            if char.isalnum():  # \d, \p{..}, \Q, \1, \k<..>: classes, quoting, back-references
                raise QueryRejected("regex", _REGEX_MESSAGE.format(shown))
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in _REGEX_OPERATORS:
            raise QueryRejected("regex", _REGEX_MESSAGE.format(shown))
    if escaped:
        raise QueryRejected("regex", _REGEX_MESSAGE.format(shown))


_REGEX_MESSAGE = (
    "the pattern of {} may only hold literal characters, '.', '^', '$' and escaped "
    "punctuation: repetition, groups, alternation and classes can take exponential time"
)


def _check_like_pattern(node: exp.Expr, shown: str) -> None:
    text = _literal_text(node, shown)
    body = text.rstrip("%")
    inner = text[1:-1] if len(text) >= 2 else ""
    contains = text.startswith("%") and text.endswith("%") and not set("%_\\") & set(inner)
    if body.count("%") > 1 and not contains:
        raise QueryRejected(
            "regex",
            f"a {shown} pattern may have at most one '%' before its end (or be '%text%'): "
            "several wildcards can take polynomial time on long values",
        )


RESERVED_PREFIX = "_ss_"
"""Column names the engine adds (labels, origin, masks); a user column by that name could
pass for one of them."""
_RESERVED_IN_TEXT = re.compile(r"(?:\A|[^A-Za-z0-9_])_ss_", re.IGNORECASE)


def _check_reserved_names(tree: exp.Expr) -> None:
    """No name the query writes, and no string that can become a name, starts with ``_ss_``.

    Identifiers are the obvious way; strings are the other: a schema string
    (``from_json(s, '_ss_tid STRING').*``, ``from_csv``), a struct key or a JSON key turn
    into column names when expanded, without any identifier in the text.
    """
    for node in tree.walk():
        if isinstance(node, exp.Identifier) and node.name.lower().startswith(RESERVED_PREFIX):
            reserved = True
        elif isinstance(node, exp.Literal) and node.is_string:
            reserved = bool(_RESERVED_IN_TEXT.search(node.this))
        else:
            continue
        if reserved:
            raise QueryRejected(
                "reserved_name",
                f"names starting with {RESERVED_PREFIX} are reserved (also inside strings "
                "that can become names, such as schemas and keys)",
            )


LEVEL_NAME = "level"
"""The name the papers give a tuple's security level. The level itself lives in the
``_ss_lvl_*`` words (refused above); ``level`` is refused too unless an input stream has
an attribute of that name, so no query can pass a column of its own for the level."""


def check_level_name(tree: exp.Expr, attributes: Collection[str]) -> None:
    """QueryRejected when the query names or computes a ``level`` column that is not an
    attribute of one of its inputs (``attributes``: theirs, any case)."""
    if any(a.lower() == LEVEL_NAME for a in attributes):
        return
    for node in tree.walk():
        if isinstance(node, exp.Identifier) and node.name.lower() == LEVEL_NAME:
            raise QueryRejected(
                "reserved_name",
                "level: a tuple's security level is assigned by the system at secure ingest "
                "and enforced beneath the query; a query may not read, compute or name it",
            )


def _check_stars(tree: exp.Expr) -> None:
    """``*`` only selects the columns of a plain selection or counts rows (``count(*)``).

    A secured view holds columns the user never names: labels, mask flags and, in the
    statistics view of an aggregate query, every attribute masked only for STATISTICS
    (``_ss_v*``). A star anywhere else (``struct(*)``, ``to_json(struct(t.*))``,
    ``hash(*)``, or the select list of an aggregate, e.g. ``GROUP BY ALL``) would expand
    to those columns and hand statistics-only values out raw (``collect_list``, ``max``).
    """
    for star in tree.find_all(exp.Star):
        node: exp.Expr | None = star.parent
        if isinstance(node, exp.Count) and node.this is star:
            continue
        item: exp.Expr = star
        if isinstance(node, exp.Column):  # ``t.*``
            item, node = node, node.parent
        if (
            isinstance(node, exp.Select)
            and item.arg_key == "expressions"
            and not _aggregates_rows(node)
        ):
            continue
        raise QueryRejected(
            "star",
            "* may only select all columns of a plain selection or count rows (count(*)); "
            "name the columns instead",
        )


def _aggregates_rows(select: exp.Select) -> bool:
    return bool(select.args.get("group")) or any(
        isinstance(node, exp.AggFunc) for e in select.expressions for node in e.walk()
    )


_EXPANSION_MESSAGE = (
    "the {what} of {name} must be an integer literal of at most {limit}: a larger or "
    "data-driven size lets one row fill the memory of the shared engine"
)
_FORMAT_SPEC = re.compile(r"%[^%A-Za-z]*")
"""A Java format specifier up to its conversion letter: index, flags, width, precision.
One character class and nothing after it, so matching is linear (no backtracking)."""
_DIGITS = re.compile(r"[0-9]+")


def _expansion_arguments(node: exp.Expr) -> list[tuple[str, exp.Expr | None]]:
    """The size arguments of a size-amplifying call, each with what it is called."""
    if isinstance(node, exp.Repeat):
        return [("count", node.args.get("times"))]
    if isinstance(node, exp.Pad):
        return [("length", node.expression)]
    if isinstance(node, exp.Space | exp.Randstr):
        return [("length", node.this)]
    if isinstance(node, exp.Anonymous):
        name, given = node.name.lower(), node.expressions
        if name == "array_repeat":
            return [("count", given[1] if len(given) > 1 else None)]
        if name == "format_number" and len(given) > 1 and not _is_string(given[1]):
            return [("decimals", given[1])]
    return []


def _is_string(node: exp.Expr) -> bool:
    return isinstance(node, exp.Literal) and node.is_string


def _integer_literal(node: exp.Expr | None) -> int | None:
    """The value of an integer literal (``-5`` included), None for anything else."""
    negative = isinstance(node, exp.Neg)
    if negative:
        node = node.this  # type: ignore[union-attr]
    if not (isinstance(node, exp.Literal) and not node.is_string):
        return None
    try:
        value = int(node.this)
    except ValueError:
        return None
    return -value if negative else value


def _is_amplifying(node: exp.Expr) -> bool:
    return (
        bool(_expansion_arguments(node))
        or isinstance(node, exp.GenerateSeries | exp.Format | exp.Reduce)
        or (isinstance(node, exp.Anonymous) and node.name.lower() == "printf")
    )


def _check_numbers(tree: exp.Expr) -> None:
    """Every number fits the type Spark reads it as (:mod:`streamshield.lang.number_bounds`)."""
    problem = number_problem(tree)
    if problem is not None:
        raise QueryRejected("number", problem)


def _check_expansion(tree: exp.Expr) -> None:
    """No expression can make its output much larger than its input by the query's choice.

    ``repeat('x', 1000000000)``, ``lpad(s, 2147483647)``, ``array_repeat(v, n)``,
    ``sequence(1, 1e9)`` or ``printf('%0999999999d', 1)`` turn one small row into
    gigabytes inside the one Spark application every tenant shares. So every size
    argument must be an integer literal of at most :data:`MAX_EXPANSION` (a size taken
    from data is refused: a tenant's value would choose it), ``sequence`` takes integer
    literals only and at most that many elements, format strings are literals with
    widths and precisions within the limit, and limits cannot be multiplied: no
    amplifying call inside another one or inside a lambda. ``aggregate``/``reduce`` is
    refused (a merge such as ``concat(acc, acc)`` doubles its accumulator per element).
    """
    for node in tree.walk():
        if isinstance(node, exp.Reduce):
            raise QueryRejected(
                "expansion",
                "aggregate/reduce over arrays is not allowed: its accumulator can grow "
                "exponentially with the array",
            )
        if not _is_amplifying(node):
            continue
        name = _shown(_expansion_name(node))
        for what, argument in _expansion_arguments(node):
            value = _integer_literal(argument)
            if value is None or value > MAX_EXPANSION:
                message = _EXPANSION_MESSAGE.format(what=what, name=name, limit=MAX_EXPANSION)
                raise QueryRejected("expansion", message)
        if isinstance(node, exp.GenerateSeries):
            _check_series(node, name)
        if isinstance(node, exp.Format) or (
            isinstance(node, exp.Anonymous) and node.name.lower() == "printf"
        ):
            _check_format(node, name)
        _check_not_nested(node, name)


def _expansion_name(node: exp.Expr) -> str:
    """The Spark name the user wrote (sqlglot renames some of these functions)."""
    if isinstance(node, exp.Pad):
        return "lpad" if node.args.get("is_left") else "rpad"
    if isinstance(node, exp.GenerateSeries):
        return "sequence"
    if isinstance(node, exp.Format):
        return "format_string"
    return _func_name(node)  # type: ignore[arg-type]


def _check_series(node: exp.GenerateSeries, name: str) -> None:
    start, end = _integer_literal(node.args.get("start")), _integer_literal(node.args.get("end"))
    step = _integer_literal(node.args.get("step")) if node.args.get("step") else 1
    if start is None or end is None or not step:
        raise QueryRejected(
            "expansion", f"{name} takes integer literals only (start, stop and a non-zero step)"
        )
    if abs(end - start) // abs(step) + 1 > MAX_EXPANSION:
        raise QueryRejected("expansion", f"{name} may produce at most {MAX_EXPANSION} elements")


def _check_format(node: exp.Expr, name: str) -> None:
    text = node.this if isinstance(node, exp.Format) else (node.expressions or [None])[0]
    if not (isinstance(text, exp.Expression) and _is_string(text)):
        raise QueryRejected("expansion", f"the format of {name} must be a string literal")
    for spec in _FORMAT_SPEC.findall(text.this):
        for size in _DIGITS.findall(spec):
            digits = size.lstrip("0") or "0"
            if len(digits) > len(str(MAX_EXPANSION)) or int(digits) > MAX_EXPANSION:
                message = _EXPANSION_MESSAGE.format(
                    what="width and precision", name=name, limit=MAX_EXPANSION
                )
                raise QueryRejected("expansion", message)


def _check_not_nested(node: exp.Expr, name: str) -> None:
    """Refuse an amplifying call under another one or in a lambda (limits would multiply)."""
    parent = node.parent
    while parent is not None:
        if isinstance(parent, exp.Lambda) or _is_amplifying(parent):
            raise QueryRejected(
                "expansion",
                f"{name} may not be used inside another size-amplifying function or a lambda",
            )
        parent = parent.parent


def _table_name(table: exp.Table) -> str:
    return ".".join(part.name for part in table.parts)


def _resolve_tables(tree: exp.Expr, catalog: Mapping[str, str], sql: str) -> set[str]:
    """Resolve every table reference as Spark would; mark stream references for rewrite.

    CTE scope follows Spark: a CTE body sees outer CTEs and the CTEs defined before it in
    the same WITH, but not itself (a self-reference reads the outer relation) nor later
    ones. Any doubt resolves to "not a CTE", which makes the reference a stream (rewritten
    to its secured view) or an unknown relation (rejected), never an unsecured read.
    """
    found: set[str] = set()
    stack: list[tuple[exp.Expr, frozenset[str]]] = [(tree, frozenset())]
    while stack:
        node, ctes = stack.pop()
        if isinstance(node, exp.Table):
            stream = _resolve_table(node, ctes, catalog, sql)
            if stream is not None:
                node.meta[_STREAM_META] = stream
                found.add(stream)
        children = list(node.iter_expressions())
        withs = [child for child in children if isinstance(child, exp.With)]
        inner = ctes
        for with_ in withs:
            defined: set[str] = set()
            for cte in with_.expressions:
                name = cte.alias_or_name.lower()
                if name in defined:
                    raise QueryRejected(
                        "duplicate_cte", f"CTE {_shown(cte.alias_or_name)} is defined twice"
                    )
                stack.append((cte.this, ctes | defined))
                defined.add(name)
            inner = inner | defined
        stack.extend((child, inner) for child in children if not isinstance(child, exp.With))
    return found


def _resolve_table(
    table: exp.Table, ctes: frozenset[str], catalog: Mapping[str, str], sql: str
) -> str | None:
    """The catalog stream a table reference reads, ``None`` for a CTE, or a rejection."""
    for part in table.parts:
        start = part.meta.get("start")
        if isinstance(start, int) and 0 <= start < len(sql) and sql[start] in "'\"":
            # sqlglot reads ``FROM 'x'`` as a quoted name; Spark would not, and echoing the
            # "name" could echo a value.
            raise QueryRejected("parse_error", "a string literal cannot name a relation")
    qualifier = table.args.get("db")
    if qualifier is not None or table.args.get("catalog") is not None:
        source = qualifier.name.lower() if qualifier is not None else ""
        if source in FILE_FORMATS or re.search(r"[/\\:]", table.name):
            raise QueryRejected(
                "file_path",
                "reading files directly (format.`path`) is not allowed; query a stream",
            )
        raise QueryRejected(
            "unknown_relation",
            f"unknown relation {_shown(_table_name(table))}: qualified names are not allowed",
        )
    name = table.name.lower()
    if name in ctes:
        return None
    if name in catalog:
        return catalog[name]
    raise QueryRejected(
        "unknown_relation",
        f"unknown relation {_shown(table.name)}: no such stream, or you lack VIEW OBJECT on it",
    )


def _count(tree: exp.Expr, kind: type[exp.Expr]) -> int:
    return sum(1 for _ in tree.find_all(kind))


def _time_windows(tree: exp.Expr) -> Iterator[exp.Anonymous]:
    for func in tree.find_all(exp.Anonymous):
        if func.name.lower() in TIME_WINDOW_FUNCTIONS:
            yield func


def _check_limits(tree: exp.Expr, max_joins: int, max_windows: int) -> None:
    """Joins and time windows hold streaming state; cap them so one query cannot hog it."""
    joins = _count(tree, exp.Join)
    if joins > max_joins:
        raise QueryRejected("too_many_joins", f"{joins} joins, at most {max_joins} allowed")
    # The same window written in SELECT and GROUP BY is one window, so count distinct ones.
    windows = len({func.sql(dialect="spark", comments=False) for func in _time_windows(tree)})
    if windows > max_windows:
        raise QueryRejected(
            "too_many_windows", f"{windows} time windows, at most {max_windows} allowed"
        )

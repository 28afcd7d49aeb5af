"""A registration reads its query with sqlglot once and hands Spark each statement once.

``POST /queries`` admits the text once (lang/admission.py): one sqlglot parse, whose
tree every security rewrite works on (lang/rewrite_rules.py); what the rewrites add is
built as trees, never as text parsed again. The last tree is rendered once and that
text is what Spark parses, once. A second parse of the same query would be a second
reading the rules could disagree with; a second Spark parse of it, a plan nobody
secured. Counted through the real server for every shape a query takes, each in the
engine that runs it (a network branch, a window branch, a shared join, a query of its
own, a statistics fold). The one statement besides: an aggregate folded in its
network runs its fold's partials (lang/partial_aggregates.py), a second statement
derived from the same secured tree, planned once too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import sqlglot.parser
from pyspark.sql import SparkSession

from tests.server.conftest import ok, start_server, stop_server
from tests.server.test_query_lifecycle import QUERIES, USERS, set_up_shapes

pytestmark = pytest.mark.spark

STATEMENTS = {"agg": 2, "slide": 2, "stats": 2}
"""Spark statements a registration plans, where not one: a folded aggregate's query and
its fold's partials."""


@contextmanager
def counted() -> Iterator[Counter]:
    """sqlglot parses and Spark SQL statements, with the texts Spark was given."""
    counts: Counter = Counter()
    parse, sql = sqlglot.parser.Parser.parse, SparkSession.sql

    def counting_parse(self, *args, **kwargs):
        counts["sqlglot"] += 1
        return parse(self, *args, **kwargs)

    def counting_sql(self, text, *args, **kwargs):
        counts["spark"] += 1
        counts[text] += 1
        return sql(self, text, *args, **kwargs)

    sqlglot.parser.Parser.parse = counting_parse  # type: ignore[method-assign]
    SparkSession.sql = counting_sql  # type: ignore[method-assign]
    try:
        yield counts
    finally:
        sqlglot.parser.Parser.parse = parse  # type: ignore[method-assign]
        SparkSession.sql = sql  # type: ignore[method-assign]


@pytest.fixture(scope="module")
def clients(spark, tmp_path_factory):
    server = start_server(tmp_path_factory.mktemp("parses"), spark, USERS)
    set_up_shapes(server.login("joe", ["ADMIN"]))
    yield {"al": server.login("al", ["CUSTOMER1"]), "bob": server.login("bob", ["CUSTOMER2"])}
    stop_server(server)


@pytest.mark.parametrize("name", list(QUERIES))
def test_a_registration_parses_its_query_once(clients, name: str) -> None:
    user, text = QUERIES[name]
    with counted() as counts:
        ok(clients[user].post("/queries", json={"name": name, "text": text}), 201)
    assert counts["sqlglot"] == 1, counts
    given = {t: n for t, n in counts.items() if t not in ("sqlglot", "spark")}
    assert counts["spark"] == STATEMENTS.get(name, 1) and all(n == 1 for n in given.values()), given
    # explain shows the text Spark was given for the query, as the rewrites made it
    plan = ok(clients[user].get(f"/queries/{name}/explain"))
    assert plan["secured_sql"] in given, (plan["secured_sql"], given)

"""Spark's own error condition names, to tell an error class from a value in a message.

A failure reaches a query's owner as its error class only, found in the message as a
bracketed name (``[DIVIDE_BY_ZERO] ...``). Messages also bracket other things, data
values among them (``unexpected key [902]``), so a bracketed name counts only if Spark
defines it: the JVM's ``error/error-conditions.json`` (in the spark-common-utils jar
PySpark ships) and PySpark's own list. Read once, without a JVM.
"""

from __future__ import annotations

import contextlib
import json
import zipfile
from functools import cache
from pathlib import Path

import pyspark


@cache
def conditions() -> frozenset[str]:
    """Every top-level condition name Spark and PySpark define (empty if unreadable)."""
    root = Path(pyspark.__file__).parent
    names: set[str] = set()
    for jar in sorted((root / "jars").glob("spark-common-utils_*.jar")):
        try:
            with zipfile.ZipFile(jar) as archive:
                names |= set(json.loads(archive.read("error/error-conditions.json")))
        except (OSError, KeyError, ValueError, zipfile.BadZipFile):
            continue
    python = root / "errors" / "error-conditions.json"
    with contextlib.suppress(OSError, ValueError):
        names |= set(json.loads(python.read_text()))
    return frozenset(names)


def is_condition(name: str) -> bool:
    """Whether ``name`` (``CLASS`` or ``CLASS.SUBCLASS``) is one of Spark's conditions."""
    return name.split(".", 1)[0] in conditions()

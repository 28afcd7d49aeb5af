"""The policy core and the text forms must not need a JVM (DESIGN.md section 6)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import streamshield.network
import streamshield.policy

PURE_PACKAGES = (
    "streamshield.policy",
    "streamshield.lang",
    "streamshield.catalog",
    "streamshield.network",
)


@pytest.mark.parametrize("package", [streamshield.policy, streamshield.network])
def test_pure_sources_do_not_import_pyspark(package: ModuleType) -> None:
    root = Path(package.__file__).parent
    imports = re.compile(r"^\s*(from|import)\s+(pyspark|py4j)", re.MULTILINE)
    assert [p.name for p in root.glob("*.py") if imports.search(p.read_text())] == []


def test_importing_the_pure_core_loads_no_pyspark() -> None:
    code = (
        "import sys, pkgutil, importlib\n"
        f"for name in {PURE_PACKAGES!r}:\n"
        "    package = importlib.import_module(name)\n"
        "    for info in pkgutil.iter_modules(package.__path__):\n"
        "        importlib.import_module(name + '.' + info.name)\n"
        "import streamshield.demo, streamshield.landing\n"
        "import streamshield.cep.pattern, streamshield.cep.oracle, streamshield.cep.validation\n"
        "import streamshield.examples.hospital, streamshield.examples.hospital_catalog\n"
        "import streamshield.examples.cloud_audit_report  # with the scenario and its oracle\n"
        "print(sorted(m for m in sys.modules if m.startswith(('pyspark', 'py4j'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

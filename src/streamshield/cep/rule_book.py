"""The administrator's current attribute operators, versioned (issue 15 item 4).

Running patterns read the book at every micro-batch: a new version makes each of them
re-check its registration and rebuild its protection before it delivers anything more
(:mod:`streamshield.cep.running`). Pure: no pyspark.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from streamshield.policy.cep_rules import AccessObject
from streamshield.policy.roles import RoleHierarchy


@dataclass(frozen=True)
class Edition:
    """One version of the rules (the version grows by one per change)."""

    version: int
    access: AccessObject
    hierarchy: RoleHierarchy


class RuleBook:
    """The rules in force; replacing them is atomic and bumps the version."""

    def __init__(self, access: AccessObject, hierarchy: RoleHierarchy) -> None:
        self._lock = threading.Lock()
        self._edition = Edition(1, access, hierarchy)

    def current(self) -> Edition:
        with self._lock:
            return self._edition

    def replace(self, access: AccessObject, hierarchy: RoleHierarchy | None = None) -> Edition:
        with self._lock:
            old = self._edition
            self._edition = Edition(old.version + 1, access, hierarchy or old.hierarchy)
            return self._edition

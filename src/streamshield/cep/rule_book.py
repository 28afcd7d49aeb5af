"""The administrator's current attribute operators, versioned (docs/cep.md).

Running patterns read the book at every micro-batch: a new version of the rules, or of
the roles the rules are read under (the role hierarchy, users' roles, grants, levels:
``rights``), makes each of them re-check its registration and rebuild its protection
before it delivers anything more (:mod:`streamshield.cep.running`). The hierarchy is
asked of ``rights`` at every read, never kept: a role created or an edge changed on a
running server is what the next read sees. Pure: no pyspark.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from streamshield.policy.cep_rules import AccessObject
from streamshield.policy.roles import RoleHierarchy

Rights = Callable[[], tuple[Hashable, RoleHierarchy]]
"""The roles now: a stamp that changes with every change of roles or rights, and the
role hierarchy in force (read after the stamp, so that it is at least as new)."""


@dataclass(frozen=True)
class Edition:
    """One version of the rules (the version grows by one per change), read under the
    role hierarchy in force and the stamp of the rights it was read with."""

    version: int
    access: AccessObject
    hierarchy: RoleHierarchy
    rights: Hashable = None

    @property
    def stamp(self) -> tuple[int, Hashable]:
        """What a plan built under this edition depends on: equal stamps, equal plans."""
        return self.version, self.rights


class RuleBook:
    """The rules in force; replacing them is atomic and bumps the version."""

    def __init__(self, access: AccessObject, hierarchy: RoleHierarchy | Rights) -> None:
        """``hierarchy``: a fixed one, or the live roles (:data:`Rights`)."""
        self._lock = threading.Lock()
        self._version, self._access = 1, access
        self._rights: Rights = hierarchy if callable(hierarchy) else (lambda: (None, hierarchy))

    def current(self) -> Edition:
        stamp, hierarchy = self._rights()
        with self._lock:
            return Edition(self._version, self._access, hierarchy, stamp)

    def replace(self, access: AccessObject) -> Edition:
        with self._lock:
            self._version, self._access = self._version + 1, access
        return self.current()

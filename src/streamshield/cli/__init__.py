"""The ``streamshield`` command line: ``main`` is its root command.

:mod:`.main` holds the root, the local commands (``run``, ``init``, ``land``, ``ingest``,
``query``, ``demo``), ``serve`` and the ``client`` group; each other module adds one area's
commands to them (:mod:`.admin`, :mod:`.cep`, :mod:`.levels`, :mod:`.networks`,
:mod:`.operations`, :mod:`.recovery`). :mod:`.http` is their one way to a server,
:mod:`.output` their one way of printing and failing.
"""

from streamshield.cli.main import main

__all__ = ["main"]

"""Where a user's Delta sink may write (server/sink_service.py ``within``): under a root
an administrator allowed, never in the server's own storage, never out by ``..`` or a
symbolic link."""

from __future__ import annotations

import os
from pathlib import Path

from streamshield.server.sink_service import within


def test_a_local_table_must_resolve_under_an_allowed_root(tmp_path: Path) -> None:
    lake, server = tmp_path / "lake", tmp_path / "server"
    lake.mkdir()
    server.mkdir()
    roots = [str(lake)]
    assert within(str(lake / "t"), roots, server)
    assert within(f"file://{lake}/a/b", roots, server)
    assert not within(str(lake) + "-evil/t", roots, server)  # a prefix is not a parent
    assert not within(str(lake / ".." / "t"), roots, server)
    assert not within(str(tmp_path / "t"), roots, server)
    assert not within(str(lake / "t"), [], server)  # nothing allowed: nowhere
    assert not within("relative/t", ["relative"], server)
    os.symlink(server, lake / "link")
    assert not within(str(lake / "link" / "landing"), roots, server)  # out by a link
    assert not within(str(server / "t"), [str(tmp_path)], server)  # the server's storage


def test_a_remote_table_must_be_under_an_allowed_prefix() -> None:
    server = Path("/srv/streamshield")
    roots = ["s3://bucket/lake/", "s3://other"]
    assert within("s3://bucket/lake/t", roots, server)
    assert not within("s3://bucket/lake-evil/t", roots, server)
    assert not within("s3://bucket/lake/../private/t", roots, server)
    assert not within("s3://other/t", roots, server)  # a root without its slash is none
    assert not within("gs://bucket/lake/t", roots, server)

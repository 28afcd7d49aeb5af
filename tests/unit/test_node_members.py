"""A window node's state goes with the last registered query it served, never before
(engine/sharing/node_members.py)."""

from __future__ import annotations

from pathlib import Path

from streamshield.engine.sharing import node_members


def _node(nodes: Path, digest: str, *names: str) -> Path:
    directory = nodes / digest
    (directory / "v=3").mkdir(parents=True)
    (directory / "v=3" / "part.parquet").write_bytes(b"rows")
    for name in names:
        node_members.join(directory, name)
    return directory


def test_a_node_goes_with_its_last_member_only(tmp_path: Path) -> None:
    shared = _node(tmp_path, "aa", "q1", "q2")
    own = _node(tmp_path, "bb", "q1")
    node_members.join(shared, "q1")  # a restart joins again: listed once
    assert node_members.members(shared) == {"q1", "q2"}
    assert node_members.leave(tmp_path, "q1") == [own]
    assert not own.exists(), "q1 was its only member"
    assert (shared / "v=3" / "part.parquet").exists(), "q2 still uses it"
    assert node_members.members(shared) == {"q2"}
    assert node_members.leave(tmp_path, "q2") == [shared]
    assert list(tmp_path.iterdir()) == []


def test_a_query_that_never_joined_a_node_leaves_it_alone(tmp_path: Path) -> None:
    node = _node(tmp_path, "aa", "q1")
    assert node_members.leave(tmp_path, "q9") == []
    assert node_members.leave(tmp_path / "missing", "q1") == []
    assert node_members.members(node) == {"q1"}


def test_an_unknown_or_unreadable_record_is_never_taken_for_unused(tmp_path: Path) -> None:
    legacy = _node(tmp_path, "old")  # written before the records: nobody listed
    broken = _node(tmp_path, "broken")
    (broken / node_members.MEMBERS).write_text('{"q1": true}')
    torn = _node(tmp_path, "torn")
    (torn / node_members.MEMBERS).write_text('["q1"')
    assert node_members.leave(tmp_path, "q1") == []
    assert legacy.exists() and broken.exists() and torn.exists()


def test_a_deletion_cut_short_by_a_crash_is_finished_later(tmp_path: Path) -> None:
    half = tmp_path / f"{node_members.GONE}aa"
    (half / "v=1").mkdir(parents=True)
    kept = _node(tmp_path, "bb", "q2")
    node_members.leave(tmp_path, "q1")
    assert not half.exists() and kept.exists()


def test_a_window_network_forgets_a_query_as_every_branched_network_does() -> None:
    """Code holding any BranchedNetwork calls ``forget(name)``: a WindowNetwork must take
    the same call (dropping its nodes is a separate helper over a folder)."""
    from streamshield.engine.sharing.branched_network import BranchedNetwork
    from streamshield.engine.sharing.window_network import WindowNetwork

    assert WindowNetwork.forget is BranchedNetwork.forget

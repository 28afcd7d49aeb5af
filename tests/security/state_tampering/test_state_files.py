"""Shield state snapshots and the offline recovery, without a JVM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from streamshield.cli import main
from streamshield.engine.ingest.tracker_state import ChannelState, ShieldStateError, StateStore
from streamshield.policy.elements import Channel

CHANNEL = Channel("HeartRate", "ward-A")


def _store(tmp_path: Path, batches: int) -> StateStore:
    store = StateStore(tmp_path / "shield_state")
    for batch_id in range(batches):
        store.save(batch_id, {CHANNEL: ChannelState(last_seq=10 * batch_id)})
    return store


def test_batch_n_starts_from_exactly_snapshot_n_minus_1(tmp_path) -> None:
    store = _store(tmp_path, 3)
    assert store.load(0) == {}
    assert store.load(3)[CHANNEL].last_seq == 20


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda p, older: p.unlink(), "is missing"),
        (lambda p, older: p.write_bytes(p.read_bytes()[:-7]), "unreadable"),
        (lambda p, older: p.write_bytes(older.read_bytes()), "does not belong to batch 2"),
        (lambda p, older: p.write_text(p.read_text().replace("20", "19")), "checksum"),
        (lambda p, older: p.write_text(json.dumps({"batch": 2})), "checksum"),
        (lambda p, older: p.write_text("[]"), "does not belong"),
    ],
    ids=["deleted", "truncated", "rolled back", "altered", "no channels", "not a snapshot"],
)
def test_a_damaged_snapshot_stops_labelling_and_never_falls_back(tmp_path, damage, message):
    store = _store(tmp_path, 3)
    damage(store.directory / "2.json", store.directory / "0.json")
    with pytest.raises(ShieldStateError, match=message):
        store.load(3)
    with pytest.raises(ShieldStateError):
        store.policies_in_force()  # delegation decides on it: refused, not guessed


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    (root / "landing" / "HeartRate").mkdir(parents=True)
    (root / "store" / "checkpoints" / "ingest" / "offsets").mkdir(parents=True)
    (root / "store" / "labelled" / "_commits").mkdir(parents=True)
    _store(root / "store", 2)
    return root


def test_relabel_moves_ingest_state_aside_and_keeps_the_landing_zone(tmp_path) -> None:
    root = _root(tmp_path)
    refused = CliRunner().invoke(main, ["admin", "relabel", "--root", str(root)])
    assert refused.exit_code == 1 and "--yes" in refused.output
    assert (root / "store" / "shield_state" / "1.json").exists()

    done = CliRunner().invoke(main, ["admin", "relabel", "--root", str(root), "--yes"])
    assert done.exit_code == 0, done.output
    store = root / "store"
    assert not any((store / p).exists() for p in ("checkpoints/ingest", "labelled", "shield_state"))
    [aside] = (store / "quarantine").iterdir()
    assert sorted(p.name for p in aside.iterdir()) == [
        "checkpoints-ingest",
        "labelled",
        "shield_state",
    ]
    assert (aside / "shield_state" / "1.json").exists() and (
        root / "landing" / "HeartRate"
    ).is_dir()


def test_relabel_refuses_what_is_not_a_storage_root(tmp_path) -> None:
    answer = CliRunner().invoke(main, ["admin", "relabel", "--root", str(tmp_path), "--yes"])
    assert answer.exit_code == 1 and "not a storage root" in answer.output
    assert "Traceback" not in answer.output


def test_readers_beside_ingest_see_the_committed_state_while_a_save_is_in_progress(tmp_path):
    """Snapshot N is written before the newest-batch record moves to N: a reader in
    between (the stream page, a delegation check) gets N-1's policies, not an error."""
    store = _store(tmp_path, 2)
    assert store.committed() == 1
    store.snapshots.save(2, {"batch": 2, "sha256": "", "channels": {}})  # record still at 1
    assert store.policies_in_force() == {}  # no policy held; read from snapshot 1
    assert store.committed() == 1
    with pytest.raises(ShieldStateError, match="out of step"):
        store.newest()  # a restart still refuses that state
    assert StateStore(tmp_path / "nothing").policies_in_force() == {}

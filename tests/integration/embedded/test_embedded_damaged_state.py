"""A damaged local store never costs a good record: it is moved aside and rebuilt from the
changelog, and every update is hydrated from the changelog's state, none sent to the DLQ.

The damage is done to real RocksDB files, as a disk fault or a careless hand would: 16 bytes
garbled in the first data block of each table file (between two runs, and under a running
engine), the MANIFEST deleted, a store path that is a file, large values or rows removed
through rocksdict. The rows' TOASTed column is large enough to be kept out of line, so a
placeholder's fill reads it lazily, inside the hydration rules.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from state import layout
from state.layout import is_large_value_key
from state.stores.rocksdb import RocksDBStore
from tests.harness.cdc_events import ToastTable, after_of
from tests.harness.hydrator_process import App, HydratorProcess, run_to_completion
from tests.harness.topics import produce, read_topic

pytestmark = pytest.mark.integration

KEYS = 100
PARTITIONS = 2
DOC_SIZE = 6_000  # over the large-value threshold: kept out of line, read when a fill needs it
MOVED = r"(\S+-state-\d+): the local store is damaged \((.*)\); moved it to (\S+)"


class Run:
    """One application over a fresh input topic: inserts hydrated, then stores to damage."""

    def __init__(self, app: App) -> None:
        self.bootstrap, self.name, self.state_dir = app.bootstrap, app.name, app.state_dir
        self.source, self.output = app.create_source(PARTITIONS), f"{app.name}.out"
        self.dlq = app.dlq
        self.table = ToastTable(doc_size=DOC_SIZE)
        self.args = app.run_args(output_topic=self.output)

    def once(self) -> str:
        """Run with --available-now; its log."""
        done = run_to_completion([*self.args, "--available-now"], timeout_s=240)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        return done.stderr

    def insert_and_flush(self) -> list[Path]:
        """Every key inserted and hydrated; the stores' memtables flushed into table files (a
        short run leaves its records in the write-ahead log)."""
        produce(self.bootstrap, self.source, [self.table.insert(k) for k in range(KEYS)])
        self.once()
        stores = self.stores()
        assert len(stores) == PARTITIONS
        for path in stores:
            store = RocksDBStore(path)
            store._db.flush()
            store.close()
            assert list(path.glob("*.sst")), path
        return stores

    def stores(self) -> list[Path]:
        root = self.state_dir / self.name
        return sorted(p for p in root.glob(f"{self.name}-state-*") if ".damaged-" not in p.name)

    def aside(self) -> list[Path]:
        return sorted((self.state_dir / self.name).glob(f"{self.name}-state-*.damaged-*"))

    def update_all(self) -> None:
        produce(self.bootstrap, self.source, [self.table.update(k) for k in range(KEYS)])

    def check_every_update_hydrated(self, rounds: int = 2) -> None:
        """Every output of the `rounds` writes of each key (the inserts, then updates) is the
        full row (the placeholders filled from the changelog's state), and nothing went to the
        DLQ."""
        outputs = read_topic(self.bootstrap, self.output)
        assert len(outputs) == rounds * KEYS
        for out in outputs:
            lsn, after = after_of(out.value)
            assert after == self.table.expected_after[lsn], f"lsn {lsn}: {str(after)[:120]}"
        assert read_topic(self.bootstrap, self.dlq) == []

    def check_no_large_value_deleted_in_the_changelog(self) -> None:
        """No update here drops a large value: a tombstone for one would be a store's damage
        written to the changelog as if the data were gone."""
        changelog = read_topic(self.bootstrap, f"{self.name}-state", isolation="read_uncommitted")
        deleted = [r.key for r in changelog if r.key and is_large_value_key(r.key) and not r.value]
        assert deleted == []


def _state_tool(run: Run, *args: str) -> subprocess.CompletedProcess[str]:
    where = ["--state-dir", str(run.state_dir), "--application-id", run.name]
    return run_to_completion(["state", *args, *where])


def _first_value_owner(store: Path) -> str:
    """The canonical key of the row whose large value sorts first in `store`: it lies in the
    store's first data block."""
    opened = RocksDBStore(store)
    first = next(opened.keys_with_prefix(layout.LARGE_VALUE_PREFIX))
    opened.close()
    return layout.split_state_key(layout.split_large_value_key(first)[0])[1]


def _tools_report_damage(run: Run, reason: str, damaged_key: str | None = None) -> None:
    """`state stats` and `state inspect` (of a key whose state is damaged) on a damaged store:
    exit 1 and the reason, never `keys: 0` or a traceback."""
    commands: list[tuple[str, ...]] = [("stats",), ("stats", "--json")]
    if damaged_key is not None:
        commands.append(("inspect", "--key", damaged_key))
    for args in commands:
        done = _state_tool(run, *args)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert "damaged" in done.stderr and reason in done.stderr, done.stderr
        assert "Traceback" not in done.stderr and done.stdout == "", done


def _garble_first_block(store: Path) -> int:
    """16 bytes garbled inside the first data block of each table file; how many files."""
    files = sorted(store.glob("*.sst"))
    for file in files:
        with file.open("r+b") as f:
            f.seek(64)
            f.write(b"\xa5" * 16)
    return len(files)


def _moved(log: str, stores: list[Path]) -> None:
    """A warning names each damaged store and where it was moved."""
    found = {m.group(1): m.group(3) for m in re.finditer(MOVED, log)}
    for store in stores:
        assert store.name in found, log
        assert Path(found[store.name]).name.startswith(f"{store.name}.damaged-"), log


def test_garbled_table_files_between_runs_are_found_at_open(app: App) -> None:
    run = Run(app)
    stores = run.insert_and_flush()
    damaged_key = _first_value_owner(stores[0])
    for store in stores:
        assert _garble_first_block(store) >= 1
    _tools_report_damage(run, "block checksum mismatch", damaged_key)
    run.update_all()
    log = run.once()
    _moved(log, stores)
    assert "block checksum mismatch" in log
    assert len(run.aside()) == PARTITIONS
    run.check_every_update_hydrated()
    run.check_no_large_value_deleted_in_the_changelog()


def test_garbled_table_files_under_a_running_engine_restart_it_and_cost_no_record(
    app: App, tmp_path: Path
) -> None:
    """The open-time check passed; the damage appears later, under a read (a row's, or a large
    value's inside the rules): the batch is aborted, the store moved aside and rebuilt."""
    run = Run(app)
    stores = run.insert_and_flush()
    with HydratorProcess(run.args, tmp_path / "run.log") as process:
        process.wait_until_held(set(range(PARTITIONS)))
        for store in stores:
            _garble_first_block(store)
        run.update_all()
        process.wait_for_log(r"the local state store failed \(", timeout_s=120)
        deadline = time.monotonic() + 120
        while len(read_topic(run.bootstrap, run.output)) < 2 * KEYS:
            assert time.monotonic() < deadline, process.log
            assert process.process is not None and process.process.poll() is None, process.log
            time.sleep(0.5)
        assert process.terminate() == 0, process.log
    log = process.log
    assert "Traceback" not in log, log
    moved = re.findall(MOVED, log)
    assert moved, log
    assert {name for name, _, _ in moved} <= {s.name for s in stores}
    run.check_every_update_hydrated()
    run.check_no_large_value_deleted_in_the_changelog()


def test_a_missing_manifest_is_damage_not_a_crash_loop(app: App) -> None:
    run = Run(app)
    stores = run.insert_and_flush()
    for manifest in stores[0].glob("MANIFEST-*"):
        manifest.unlink()
    stores[1].rename(stores[1].with_name("elsewhere"))
    stores[1].write_bytes(b"not a store")  # a store path that is a file
    run.update_all()
    log = run.once()
    _moved(log, stores)
    assert re.search(r"No such file or directory.*MANIFEST", log), log
    assert "is not a directory" in log
    run.check_every_update_hydrated()


def test_large_values_or_rows_removed_from_a_store_are_rebuilt_never_forgotten(app: App) -> None:
    """A store that disagrees with itself lost records the changelog still holds: rebuilt from
    it. The old sweep made the rows forget the columns and wrote that to the changelog, so
    every later update stayed unresolved, even after a rebuild."""
    run = Run(app)
    stores = run.insert_and_flush()
    damaged_key = _first_value_owner(stores[0])
    without_values, without_rows = (RocksDBStore(path) for path in stores)
    values = list(without_values.keys_with_prefix(b"\x00\x01"))
    assert values
    without_values.apply_unversioned({key: None for key in values})
    rows = [key for key, _ in without_rows.raw_items()]
    without_rows.apply_unversioned({key: None for key in rows[: len(rows) // 2]})
    without_values.close()
    without_rows.close()
    _tools_report_damage(run, "missing", damaged_key)

    run.update_all()
    log = run.once()
    _moved(log, stores)
    assert "large values its rows refer to are missing" in log
    assert "large values no row refers to are there" in log
    assert "forgets its column" not in log
    run.check_every_update_hydrated()
    run.check_no_large_value_deleted_in_the_changelog()

    # The changelog still holds every value: a store rebuilt from it alone fills every column.
    for path in run.stores():
        RocksDBStore.destroy(path)
    run.update_all()
    run.once()
    run.check_every_update_hydrated(rounds=3)

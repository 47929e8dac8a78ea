"""The embedded engine's state stack (state/embedded/): each layer's one job, and the settings
of the bytes under it (RocksDB's block compression, the stored layout of large values)."""

from __future__ import annotations

from pathlib import Path

from hydrator import exact
from state.embedded.cache import ENTRY_OVERHEAD, StateCache
from state.embedded.changelog import ChangelogLayer
from state.embedded.store import TaskStore
from state.large import BLOB_PACKED, InlineReader, LazyImage, unpack_value
from state.layout import is_large_value_key
from state.record import StateRecord
from state.stores.rocksdb import BOTTOMMOST_COMPRESSION, COMPRESSION, RocksDBStore

DOC = "words of a long text " * 400


def _options(path: Path) -> dict[str, str]:
    (options,) = sorted(path.glob("OPTIONS-*"))[-1:]
    pairs = (line.strip().split("=", 1) for line in options.read_text().splitlines())
    return {pair[0]: pair[1] for pair in pairs if len(pair) == 2}


def test_rocksdb_compresses_per_block_with_zstd_and_closes_into_tables(tmp_path: Path) -> None:
    store = RocksDBStore(tmp_path / "s")
    store.apply_unversioned({b"t\x00k": b"words of text " * 10_000})
    store.close()
    options = _options(tmp_path / "s")
    assert options["compression"] == COMPRESSION == "kZSTD"
    assert options["bottommost_compression"] == BOTTOMMOST_COMPRESSION == "kZSTD"
    # written out at close: a compressed table, no write-ahead log left to replay
    (table,) = (tmp_path / "s").glob("*.sst")
    assert table.stat().st_size < 10_000
    assert all(log.stat().st_size == 0 for log in (tmp_path / "s").glob("*.log"))
    reopened = RocksDBStore(tmp_path / "s")
    assert reopened.get_raw(b"t\x00k") == b"words of text " * 10_000
    reopened.close()


def test_the_cache_is_capped_by_bytes_and_drops_the_least_recently_used() -> None:
    cache = StateCache(capacity=4 * (100 + ENTRY_OVERHEAD + 2))
    for n in range(4):
        cache.remember(b"k%d" % n, n, 100)
    assert cache.get(b"k0") is not None
    cache.remember(b"k0", 0, 100)  # used again: the youngest now
    cache.remember(b"k4", 4, 100)  # past the cap: shrinks to three quarters, oldest first
    assert b"k0" in cache and b"k4" in cache and b"k1" not in cache
    assert cache.used <= cache.capacity
    cache.remember(b"huge", None, cache.capacity)  # over a quarter: never cached
    assert b"huge" not in cache


def test_the_changelog_layer_writes_rocksdb_only_when_the_transaction_commits(
    tmp_path: Path,
) -> None:
    store = RocksDBStore(tmp_path / "s")
    layer = ChangelogLayer(store, "t-0", lambda owner: InlineReader(), large_value_threshold=2048)
    key = b't\x00{"id":1}'
    layer.put(key, None, StateRecord(image={"id": 1, "doc": DOC}))
    assert layer.held_bytes >= len(DOC)
    changes = layer.changes(10**7, lambda *_: None)
    assert store.get_raw(key) is None  # nothing in RocksDB before the commit
    (value_key,) = [k for k in changes if is_large_value_key(k)]
    blob = changes[value_key]
    assert blob is not None and blob[0] == BLOB_PACKED and unpack_value(blob) == DOC
    cacheable, gone = layer.committed(changes, changelog_offset=7)
    assert store.get_raw(key) == changes[key] and store.changelog_offset == 7
    assert {k for k, _, _ in cacheable} == {key, value_key} and gone == []
    assert layer.held_bytes == 0 and not layer.dirty and layer.state_keys == 1
    store.close()


def test_the_task_store_reads_its_writes_then_the_cache_then_rocksdb(tmp_path: Path) -> None:
    key = b't\x00{"id":1}'
    states = TaskStore(RocksDBStore(tmp_path / "s"), "t-0", cache_bytes=10**6)
    assert states.state(key) is None
    row = StateRecord(image={"id": 1, "doc": DOC})
    states.put(key, None, row)
    assert states.state(key) is row  # the open transaction's write
    states.committed(states.changes(10**7, lambda *_: None), 1)
    cached = states.state(key)
    assert cached is not None and type(cached.image) is LazyImage
    assert cached.image["doc"] == DOC  # the value, from the cache (kept at commit)
    states.close()

    reopened = TaskStore(RocksDBStore(tmp_path / "s"), "t-0")
    loaded = reopened.state(key)  # from RocksDB, the value read on demand
    assert loaded is not None and loaded.image["doc"] == DOC
    assert exact.pack(loaded.image["doc"]) == exact.pack(DOC)
    reopened.close()


def test_the_changelog_topic_keeps_zstd_batches_and_the_outputs_the_producers() -> None:
    from hydrator.topology.layout import CHANGELOG_COMPRESSION, Topology

    topology = Topology("app", {"t": "t.out"}, 2)
    configs = {spec.name: spec.config for spec in topology.created_topics()}
    assert configs[topology.changelog_topic]["compression.type"] == CHANGELOG_COMPRESSION == "zstd"
    assert configs[topology.changelog_topic]["cleanup.policy"] == "compact"
    assert "compression.type" not in configs["t.out"]  # the producer's lz4, as written

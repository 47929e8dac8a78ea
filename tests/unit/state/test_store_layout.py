"""The local store's byte layouts (state/layout.py) and its damage checks (state/stores/rocksdb.py)
on real RocksDB files; a storage error passes through the core, never a dead letter."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hydrator.core.hydrator import Hydrator
from hydrator.events import RawRecord
from hydrator.formats import codec_for
from state import layout
from state.errors import StorageError, StoreCorrupted
from state.large import LargeValue, LazyImage
from state.record import StateRecord
from state.stores.rocksdb import RocksDBStore
from tests.harness.cdc_events import PLACEHOLDER, envelope, key_bytes

# Topic names and canonical keys are UTF-8 text (a topic never holds NUL).
topics = st.text(
    st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=30,
)
keys = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)
digests = st.binary(min_size=layout.DIGEST_BYTES, max_size=layout.DIGEST_BYTES)


@given(topics, keys)
def test_a_state_key_splits_into_its_topic_and_key(topic: str, key: str) -> None:
    encoded = layout.state_key(topic, key)
    assert layout.split_state_key(encoded) == (topic, key)
    assert layout.topic_of(encoded) == topic.encode()
    assert not layout.is_meta_key(encoded) and not layout.is_large_value_key(encoded)
    # every state sorts past the meta records and large values, and within its topic's range
    assert encoded >= layout.FIRST_STATE_KEY
    assert topic.encode() + b"\x00" <= encoded < layout.topic_end(topic.encode())


@given(topics, keys, digests)
def test_a_large_value_key_names_its_row_and_digest(topic: str, key: str, digest: bytes) -> None:
    owner = layout.state_key(topic, key)
    encoded = layout.large_value_key(owner, digest)
    assert layout.split_large_value_key(encoded) == (owner, digest)
    assert layout.is_large_value_key(encoded) and layout.is_meta_key(encoded)
    assert encoded < layout.FIRST_STATE_KEY


def test_meta_keys_are_no_state_and_no_large_value() -> None:
    for key in (layout.CHANGELOG_OFFSET_KEY, layout.CLOCK_KEY):
        assert layout.is_meta_key(key) and not layout.is_large_value_key(key)
        assert key < layout.FIRST_STATE_KEY
        with pytest.raises(layout.KeyLayoutError):
            layout.split_state_key(key)
    with pytest.raises(layout.KeyLayoutError):
        layout.split_large_value_key(layout.LARGE_VALUE_PREFIX + b"short")
    assert layout.decode_reading(b"garbage") is None
    assert layout.decode_offset(layout.encode_offset(42)) == 42


def _filled_store(path: Path, rows: int = 2_000) -> None:
    store = RocksDBStore(path)
    store.apply({layout.state_key("t", f"k{i:05}"): b"\x01" + b"v" * 300 for i in range(rows)}, 7)
    store._db.flush()  # into a table file
    store.close()


def test_verify_reads_every_block_and_sees_a_garbled_one(tmp_path: Path) -> None:
    """rocksdict's iterator just stops at a damaged block; verify() checks how it ended."""
    path = tmp_path / "s"
    _filled_store(path)
    store = RocksDBStore(path)
    store.verify()
    assert len(list(store.raw_items())) == 2_000
    store.close()
    (table,) = path.glob("*.sst")
    with table.open("r+b") as f:
        f.seek(64)
        f.write(b"\xa5" * 16)
    store = RocksDBStore(path)
    with pytest.raises(StoreCorrupted, match="checksum mismatch") as found:
        store.verify()
    assert found.value.path == path
    with pytest.raises(StoreCorrupted):  # a scan does not pass the damage off as the end
        list(store.raw_items())
    with pytest.raises(StoreCorrupted):
        store.get_raw(layout.state_key("t", "k00001"))
    store.close()
    RocksDBStore(path).close()  # closed for real: it opens again in this process


def test_a_missing_manifest_or_a_path_that_is_a_file_is_damage(tmp_path: Path) -> None:
    path = tmp_path / "s"
    _filled_store(path, rows=10)
    for manifest in path.glob("MANIFEST-*"):
        manifest.unlink()
    with pytest.raises(StoreCorrupted, match="No such file or directory"):
        RocksDBStore(path)
    file = tmp_path / "f"
    file.write_bytes(b"x")
    with pytest.raises(StoreCorrupted, match="not a directory"):
        RocksDBStore(file)


def test_a_store_held_elsewhere_is_no_damage(tmp_path: Path) -> None:
    store = RocksDBStore(tmp_path / "s")
    try:
        with pytest.raises(Exception) as held:
            RocksDBStore(tmp_path / "s")
        assert not isinstance(held.value, StoreCorrupted)
    finally:
        store.close()


class _FailingStore:
    def read(self, ref: LargeValue) -> object:
        raise StoreCorrupted("Corruption: block checksum mismatch", Path("/state/app-state-0"))

    def peek(self, ref: LargeValue) -> object:
        from state.large import NOT_AT_HAND

        return NOT_AT_HAND


def test_a_storage_error_inside_the_rules_passes_through_the_core() -> None:
    """A placeholder's fill reads the large value inside the rules: the store failing there is
    no fault of the record, so it is no dead letter; the engine aborts the batch."""
    image = LazyImage({"id": 1, "doc": LargeValue(b"\x01" * 16, 5000), "n": 0}, _FailingStore())
    state = StateRecord(image=image, pos=(1,))
    update = envelope("u", None, {"id": 1, "doc": PLACEHOLDER, "n": 1}, 2, "items")
    record = RawRecord("t", 0, 5, key_bytes(1), update)
    hydrator = Hydrator(codec_for("debezium"))
    key = hydrator.route(record)
    assert isinstance(key, str)
    with pytest.raises(StorageError):
        hydrator.process(state, record, key, 0)

"""Large column values kept apart from the row image (state/large.py): the state codec's
references, reading on demand, and what the embedded task writes and collects at commit."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hydrator import exact
from hydrator.engines.embedded.counts import RunCounts
from hydrator.engines.embedded.task import Task
from hydrator.events import RawRecord
from hydrator.kafka.record_limits import TopicLimits
from hydrator.topology.layout import Topology
from state.codec import FORMAT_V3, decode_state, encode_state
from state.errors import StoreCorrupted, StoreInconsistent
from state.handoff import Handoff
from state.large import (
    BLOB_LZ4,
    BLOB_PACKED,
    BLOB_ZSTD,
    COMPRESSIONS,
    DEFAULT_COMPRESSION,
    NOT_AT_HAND,
    InlineReader,
    LargeValue,
    LargeValueError,
    LazyImage,
    UnreadableValues,
    compress,
    digest_of,
    image_bytes,
    is_store_key,
    materialized,
    outline,
    split_store_key,
    store_key,
    stored_bytes_are,
    unpack_value,
)
from state.record import StateRecord, state_key
from state.stores.rocksdb import RocksDBStore
from tests.harness.cdc_events import ToastTable
from tests.support.core import debezium_hydrator
from tests.unit.engines.embedded.test_embedded_task import RecordingSink

THRESHOLD = 2048
DOC = "lorem ipsum dolor sit amet " * 400  # ~10.8 KB, compresses well
KEY = state_key("t", '{"id":1}')
TOPOLOGY = Topology("app", {"t": "t.out"}, 1, TopicLimits(10**7, 10**7, 10**7, 10**7))


class CountingReader:
    """A reader over a dict of stored values that counts what it reads."""

    def __init__(self, values: dict[bytes, Any]) -> None:
        self.values = values
        self.reads = 0

    def read(self, ref: LargeValue) -> Any:
        self.reads += 1
        return self.values[ref.digest]

    def peek(self, ref: LargeValue) -> Any:
        return NOT_AT_HAND

    def holds(self, ref: LargeValue, packed: bytes) -> bool:
        self.reads += 1
        return exact.pack(self.values[ref.digest])[0] == packed


def _ref(value: Any) -> LargeValue:
    data, _ = exact.pack(value)
    return LargeValue(digest_of(data), len(data), compress(data))


# -- the state codec ---------------------------------------------------------------------------

# Bytes written by the release before large values (state/codec.py at c2f5584), format bytes 1
# and 2: every field, a handoff and a parked record; an integer wider than 64 bits; cell times.
PREVIOUS_RELEASE = [
    "019883a2696407a3646f63d92878787878787878787878787878787878787878787878787878787878787878"
    "787878787878787878a16ec0920c03c2cd03e891c4339801a174a87b226964223a377da87b226964223a367d"
    "82a2696406a3646f63a179910ba5743a303a35c4087b226964223a377d9197a1740009c4016bc401769192a1"
    "68c4013105a87b226964223a367dcd0384",
    "029882a26964c7160131313830353931363230373137343131333033343234a3646f63a4776964659101c205"
    "9090c0c0",
    "019981a16101c0c2029090c0c081a1610a",
]


def test_state_written_by_the_previous_release_is_still_read() -> None:
    full, wide, cells = (decode_state(bytes.fromhex(data)) for data in PREVIOUS_RELEASE)
    assert full.image == {"id": 7, "doc": "x" * 40, "n": None}
    assert full.pos == (12, 3) and full.updated_at_ms == 1_000
    (handoff,) = full.handoffs
    assert handoff.image == {"id": 6, "doc": "y"} and handoff.route_key == b'{"id":7}'
    (parked,) = full.parked
    assert (parked.offset, parked.key, parked.value, parked.headers) == (
        9,
        b"k",
        b"v",
        (("h", b"1"),),
    )
    assert full.awaiting == '{"id":6}' and full.waiting_since_ms == 900
    assert wide.image == {"id": 2**70, "doc": "wide"}
    assert cells.image == {"a": 1} and cells.cell_times == {"a": 10}
    # and a record without large values keeps the bytes that release wrote
    for data in PREVIOUS_RELEASE:
        assert encode_state(decode_state(bytes.fromhex(data))).hex() == data


def test_a_row_with_references_round_trips_and_reads_only_the_column_asked_for() -> None:
    small, large = _ref("s" * 3000), _ref(DOC)
    record = StateRecord(
        image={"id": 1, "a": small.out_of_line(), "doc": large.out_of_line(), "n": 2**70},
        pos=(5,),
    )
    data = encode_state(record)
    assert data[0] == FORMAT_V3 and len(data) < 200
    reader = CountingReader({small.digest: "s" * 3000, large.digest: DOC})
    state = decode_state(data, reader)
    assert type(state.image) is LazyImage
    assert list(state.image) == ["id", "a", "doc", "n"] and "doc" in state.image
    assert reader.reads == 0
    assert state.image["doc"] == DOC and reader.reads == 1
    assert state.image["n"] == 2**70 and reader.reads == 1
    assert dict(state.image) == {"id": 1, "a": "s" * 3000, "doc": DOC, "n": 2**70}
    assert encode_state(state) == data  # written back as references, nothing read


def test_a_row_with_references_keeps_its_decimals_and_wide_integers() -> None:
    """Decimals (exact DECIMAL columns) beside a large value: format 2's extension code for them
    is a large value in format 3, which has a code of its own for them."""
    large = _ref(DOC)
    image = {"price": Decimal("12.50"), "tiny": Decimal("-1E-30"), "n": -(2**80), "doc": large}
    stored = {**image, "doc": large.out_of_line()}
    for state in (StateRecord(image=image), StateRecord(image=stored)):
        data = encode_state(state)
        assert data[0] == FORMAT_V3
        back = decode_state(data, CountingReader({large.digest: DOC}))
        assert dict(back.image) == {**image, "doc": DOC}
        assert str(back.image["price"]) == "12.50"


def test_inline_references_carry_their_stored_bytes() -> None:
    cells = outline({"id": 1, "doc": DOC}, THRESHOLD, None, "zstd")
    ref = cells["doc"]
    assert type(ref) is LargeValue and ref.compressed is not None
    assert len(ref.compressed) < len(DOC) // 4
    state = decode_state(encode_state(StateRecord(image=cells)))  # Spark's way: inline
    assert state.image["doc"] == DOC and state.image["doc"] is state.image["doc"]


def test_values_are_stored_packed_by_default_compressed_when_asked_and_every_layout_reads() -> None:
    """Layout 3 (the packed bytes as they are: RocksDB and the producer compress per block)
    is written by default; zstd (1) and lz4 (2), written by earlier releases, still read."""
    packed, _ = exact.pack(DOC)
    assert compress(packed) == bytes([BLOB_PACKED]) + packed
    assert compress(packed, "zstd")[0] == BLOB_ZSTD
    assert compress(packed, "lz4")[0] == BLOB_LZ4
    for blob in (compress(packed), compress(packed, "zstd"), compress(packed, "lz4")):
        assert unpack_value(blob, digest_of(packed)) == DOC
        assert stored_bytes_are(blob, packed)
        assert not stored_bytes_are(blob, packed[:-1] + b"!")
    with pytest.raises(LargeValueError, match="reads 1, 2 and 3"):
        unpack_value(bytes([4]) + packed)
    with pytest.raises(ValueError, match="snappy"):
        compress(packed, "snappy")


@given(
    st.one_of(st.text(min_size=1), st.binary(min_size=1), st.lists(st.integers())),
    st.sampled_from(COMPRESSIONS),
)
def test_any_value_round_trips(value: Any, compression: str) -> None:
    packed, _ = exact.pack(value)
    assert unpack_value(compress(packed, compression), digest_of(packed)) == value


def test_a_block_claiming_more_than_lz4_can_expand_to_is_refused_before_allocating() -> None:
    blob = compress(exact.pack(DOC)[0], "lz4")
    bomb = blob[:1] + (2**31 - 1).to_bytes(4, "little") + blob[5:]
    with pytest.raises(LargeValueError, match="size header"):
        unpack_value(bomb)
    with pytest.raises(LargeValueError, match="damaged"):
        unpack_value(blob[:3])


def test_damaged_or_missing_values_say_so() -> None:
    ref = _ref(DOC)
    assert ref.compressed is not None
    with pytest.raises(LargeValueError, match="digest"):
        unpack_value(ref.compressed, b"\0" * 16)
    with pytest.raises(LargeValueError, match="damaged"):
        unpack_value(ref.compressed[:-5])
    with pytest.raises(LargeValueError, match="format"):
        unpack_value(b"\x09" + ref.compressed[1:])
    with pytest.raises(LargeValueError, match="out of line"):
        InlineReader().read(ref.out_of_line())
    owner, digest = split_store_key(store_key(KEY, ref.digest))
    assert (owner, digest) == (KEY, ref.digest) and is_store_key(store_key(KEY, digest))
    assert not is_store_key(KEY)


# -- outline -----------------------------------------------------------------------------------


def test_outline_keeps_small_values_and_references_large_ones() -> None:
    image = {"id": 1, "name": "x" * 500, "doc": DOC, "tags": ["t"] * 10, "n": None}
    cells = outline(image, THRESHOLD, None)
    assert {c: v for c, v in cells.items() if c != "doc"} == {
        c: v for c, v in image.items() if c != "doc"
    }
    assert type(cells["doc"]) is LargeValue and cells["doc"].size > THRESHOLD
    assert image["doc"] == DOC  # the image itself is not changed
    # on the threshold: kept in the row
    exactly = "y" * (THRESHOLD - 3)  # msgpack: 3 header bytes for a str of this length
    assert outline({"v": exactly}, THRESHOLD, None) == {"v": exactly}


def test_an_unchanged_value_keeps_its_reference_and_a_changed_one_gets_a_new_one() -> None:
    ref = _ref(DOC).out_of_line()
    stored_value = DOC
    reader = CountingReader({ref.digest: stored_value})
    stored = LazyImage({"id": 1, "doc": ref}, reader)
    # the same object (a fill), an equal copy (the value shipped again), a different value
    assert outline({"id": 1, "doc": stored["doc"]}, THRESHOLD, stored)["doc"] is ref
    assert outline({"id": 1, "doc": "".join(DOC)}, THRESHOLD, stored)["doc"] is ref
    changed = outline({"id": 1, "doc": DOC + "!"}, THRESHOLD, stored)["doc"]
    assert changed.digest != ref.digest and changed.compressed is not None
    # an image read from the store and not changed is written back as it is
    assert outline(stored, THRESHOLD, stored) is stored.cells


def test_a_value_not_at_hand_is_compared_with_its_stored_bytes_not_hashed() -> None:
    """The stored bytes (layout 3: the packed value itself) are compared with the new value's
    packed bytes: one comparison, and the new value's digest is computed only when it differs
    (a new value is named by it)."""
    ref = _ref(DOC).out_of_line()
    reader = CountingReader({ref.digest: DOC})
    stored = LazyImage({"id": 1, "doc": ref}, reader)
    assert outline({"id": 1, "doc": "".join(DOC)}, THRESHOLD, stored)["doc"] is ref
    assert reader.reads == 1  # one comparison, nothing unpacked
    same_length = DOC[:-1] + "!"
    changed = outline({"id": 1, "doc": same_length}, THRESHOLD, stored)["doc"]
    assert changed is not ref and changed.digest == digest_of(exact.pack(same_length)[0])


def test_handoffs_and_whole_befores_carry_values_not_references() -> None:
    ref = _ref(DOC).out_of_line()
    lazy = LazyImage({"id": 1, "doc": ref}, CountingReader({ref.digest: DOC}))
    handoff = Handoff("t", "new", "old", lazy, None, "t:0:1")
    assert type(handoff.image) is dict and handoff.image["doc"] == DOC
    assert Handoff.decode(handoff.encode()).image == {"id": 1, "doc": DOC}
    assert materialized(lazy) == {"id": 1, "doc": DOC}
    plain = {"a": 1}
    assert materialized(plain) is plain


# -- the embedded task -------------------------------------------------------------------------


def _task(
    path: Path,
    threshold: int | None = THRESHOLD,
    compression: str = DEFAULT_COMPRESSION,
    rebuilt: bool = False,
) -> Task:
    store = RocksDBStore(path)
    return Task(
        0,
        debezium_hydrator(),
        store,
        TOPOLOGY,
        RecordingSink(),
        RunCounts(),
        large_value_threshold=threshold,
        large_value_compression=compression,
        rebuilt=rebuilt,
    )


def _feed(
    task: Task, records: list[tuple[bytes | None, bytes | None, Any]], first: int = 0
) -> None:
    for offset, (key, value, headers) in enumerate(records, start=first):
        task.process(RawRecord("t", 0, offset, key, value, tuple(headers)), task.now_ms())


def _commit(task: Task, offset: int = 1) -> dict[bytes, bytes | None]:
    changes = task.changes()
    task.committed(changes, offset)
    return changes


def _values(changes: dict[bytes, bytes | None]) -> dict[bytes, bytes | None]:
    return {k: v for k, v in changes.items() if is_store_key(k)}


def test_an_event_that_leaves_the_large_value_unchanged_writes_only_the_row(tmp_path: Path) -> None:
    table = ToastTable(doc_size=8_000)
    task = _task(tmp_path / "s")
    _feed(task, [table.insert(1)])
    first = _commit(task)
    key = state_key("t", '{"id":1}')
    (value_key,) = _values(first)
    assert value_key.startswith(store_key(key, b"")) and first[value_key] is not None
    assert first[value_key] == compress(exact.pack(table.rows[1]["doc"])[0])  # stored as packed
    row_bytes = len(first[key])
    assert row_bytes < 200

    _feed(task, [table.update(1)], first=1)  # doc shipped as the placeholder
    second = _commit(task, 2)
    assert not _values(second) and len(second[key]) == row_bytes
    _, output = task._sink.outputs[-1]  # type: ignore[attr-defined]
    assert orjson.loads(output.value)["after"]["doc"] == table.rows[1]["doc"]

    _feed(task, [table.update(1, touch_doc=True)], first=2)  # a new doc: written, old collected
    third = _commit(task, 3)
    assert third[value_key] is None
    (new_key,) = (k for k, v in _values(third).items() if v is not None)
    assert new_key != value_key
    assert [k for k in task.store.keys_with_prefix(b"\x00\x01")] == [new_key]

    _feed(task, [table.delete(1)], first=3)
    fourth = _commit(task, 4)
    assert fourth[new_key] is None
    assert not list(task.store.keys_with_prefix(b"\x00\x01"))


def test_a_task_told_zstd_writes_zstd_and_reads_what_lz4_wrote(tmp_path: Path) -> None:
    table = ToastTable(doc_size=8_000)
    task = _task(tmp_path / "s", compression="lz4")
    _feed(task, [table.insert(1)])
    (lz4_blob,) = _values(_commit(task)).values()
    task.close()
    task = _task(tmp_path / "s", compression="zstd")
    task._cache.clear()
    _feed(task, [table.update(1)], first=1)  # the placeholder: filled from the lz4 value
    _commit(task, 2)
    _, output = task._sink.outputs[-1]  # type: ignore[attr-defined]
    assert orjson.loads(output.value)["after"]["doc"] == table.rows[1]["doc"]
    _feed(task, [table.update(1, touch_doc=True)], first=2)
    written = [v for v in _values(_commit(task, 3)).values() if v is not None]
    assert [blob[0] for blob in written] == [BLOB_ZSTD]
    assert lz4_blob is not None and len(written[0]) < len(lz4_blob) * 0.6


def test_a_store_of_zstd_values_is_read_and_its_changed_values_are_written_packed(
    tmp_path: Path,
) -> None:
    """State written by earlier releases (each value a zstd frame, layout 1) is read as it is;
    a value that changes is written in this release's layout (3, packed), the old one
    collected in the same transaction."""
    table = ToastTable(doc_size=8_000)
    task = _task(tmp_path / "s", compression="zstd")
    _feed(task, [table.insert(1)])
    ((zstd_key, zstd_blob),) = _values(_commit(task)).items()
    assert zstd_blob is not None and zstd_blob[0] == BLOB_ZSTD
    task.close()
    task = _task(tmp_path / "s")  # the default: none
    task._cache.clear()
    _feed(task, [table.update(1)], first=1)  # the placeholder: filled from the zstd value
    assert not _values(_commit(task, 2))
    _, output = task._sink.outputs[-1]  # type: ignore[attr-defined]
    assert orjson.loads(output.value)["after"]["doc"] == table.rows[1]["doc"]
    _feed(task, [table.update(1, touch_doc=True)], first=2)
    written = _values(_commit(task, 3))
    assert written.pop(zstd_key) is None
    ((_, blob),) = written.items()
    assert blob == bytes([BLOB_PACKED]) + exact.pack(table.rows[1]["doc"])[0]


def test_values_are_read_from_the_store_when_the_cache_lacks_them(tmp_path: Path) -> None:
    table = ToastTable(doc_size=8_000)
    task = _task(tmp_path / "s")
    _feed(task, [table.insert(k) for k in range(5)])
    _commit(task)
    task.close()
    reopened = _task(tmp_path / "s")
    key = state_key("t", '{"id":3}')
    image = reopened.state(key).image
    assert type(image) is LazyImage
    assert dict(image) == table.rows[3]
    _feed(reopened, [table.update(3)], first=5)
    changes = _commit(reopened, 2)
    assert not _values(changes)


def test_a_store_that_disagrees_with_itself_is_damaged_not_corrected(tmp_path: Path) -> None:
    """A value no row refers to, or a row whose value is missing: records were lost from the
    local store that the changelog still holds. Opening it says so (the engine rebuilds it from
    the changelog); nothing is deleted, nothing written to the changelog."""
    task = _task(tmp_path / "s")
    _feed(task, [ToastTable(doc_size=8_000).insert(1)])
    _commit(task)
    (value_key,) = task.store.keys_with_prefix(b"\x00\x01")
    blob = task.store.get_raw(value_key)
    task.store.apply({value_key: None}, 2)
    task.close()
    with pytest.raises(StoreInconsistent, match="1 large values its rows refer to are missing"):
        _task(tmp_path / "s")
    store = RocksDBStore(tmp_path / "s")
    store.apply({value_key: blob, state_key("t", '{"id":1}'): None}, 3)
    store.close()
    with pytest.raises(StoreInconsistent, match="1 large values no row refers to"):
        _task(tmp_path / "s")
    store = RocksDBStore(tmp_path / "s")
    assert store.get_raw(value_key) == blob, "nothing was deleted"
    store.close()


def test_a_store_rebuilt_from_the_changelog_forgets_only_what_the_changelog_lacks(
    tmp_path: Path,
) -> None:
    """Rebuilt from the changelog alone, a store can still lack a value (the restore skipped
    its damaged record): a value no row refers to is collected; a row whose value is missing
    forgets that column (the rest of the row still fills), both written to the changelog."""
    table = ToastTable(doc_size=8_000)
    task = _task(tmp_path / "s")
    _feed(task, [table.insert(1), table.insert(2)])
    _commit(task)
    orphan = store_key(state_key("t", '{"id":9}'), b"\x01" * 16)
    (lost,) = (
        k
        for k in task.store.keys_with_prefix(b"\x00\x01")
        if k.startswith(store_key(state_key("t", '{"id":2}'), b""))
    )
    task.store.apply({orphan: _ref(DOC).compressed, lost: None}, 2)
    task.close()

    reopened = _task(tmp_path / "s", rebuilt=True)
    changes = reopened.changes()
    assert changes[orphan] is None
    row = decode_state(changes[state_key("t", '{"id":2}')])
    assert dict(row.image) == {"id": 2, "n": 0}
    assert reopened._counts.totals["large_values_missing"] == 1  # type: ignore[attr-defined]
    reopened.committed(changes, 3)
    assert reopened.state(state_key("t", '{"id":2}')).image == {"id": 2, "n": 0}
    assert dict(reopened.state(state_key("t", '{"id":1}')).image) == table.rows[1]


def test_a_missing_or_damaged_large_value_read_in_the_rules_is_a_storage_error(
    tmp_path: Path,
) -> None:
    """Read lazily inside the hydration rules, a value the store lacks or cannot read is the
    store's failure: it passes through the core (never a dead letter for the record)."""
    table = ToastTable(doc_size=8_000)
    task = _task(tmp_path / "s")
    _feed(task, [table.insert(1)])
    _commit(task)
    (value_key,) = task.store.keys_with_prefix(b"\x00\x01")
    task.store.apply({value_key: None}, 2)
    task._cache.clear()
    with pytest.raises(StoreInconsistent):
        _feed(task, [table.update(1)], first=1)
    assert not task._sink.dead_letters  # type: ignore[attr-defined]
    task.store.apply({value_key: b"\x01garbled"}, 3)
    task.states.dirty.clear()
    with pytest.raises(StoreCorrupted):
        _feed(task, [table.update(1)], first=1)
    assert not task._sink.dead_letters  # type: ignore[attr-defined]


def test_repairs_write_a_dead_transactions_values_back_as_stored(tmp_path: Path) -> None:
    table = ToastTable(doc_size=8_000)
    task = _task(tmp_path / "s")
    _feed(task, [table.insert(1)])
    _commit(task)
    (stored,) = task.store.keys_with_prefix(b"\x00\x01")
    written_by_dead = store_key(state_key("t", '{"id":1}'), b"\x02" * 16)
    task.repair([stored, written_by_dead, state_key("t", '{"id":1}')])
    changes = task.changes()
    assert changes[stored] == task.store.get_raw(stored)
    assert changes[written_by_dead] is None
    assert (
        decode_state(changes[state_key("t", '{"id":1}')]).image.cells["doc"].digest
        == split_store_key(stored)[1]
    )


def test_with_the_threshold_off_values_stay_in_the_row(tmp_path: Path) -> None:
    table = ToastTable(doc_size=8_000)
    task = _task(tmp_path / "s", threshold=None)
    _feed(task, [table.insert(1)])
    changes = _commit(task)
    assert not _values(changes) and len(changes[state_key("t", '{"id":1}')]) > 8_000


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([1, 2, 3]),
            st.sampled_from(["keep", "touch", "delete", "commit", "crash"]),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_the_store_holds_exactly_the_values_its_rows_refer_to(
    tmp_path_factory: Any, steps: list[tuple[int, str]]
) -> None:
    """Whatever the history, after every commit (and after a crash that loses the open batch)
    the store's large values are exactly those its rows refer to, and every row reads back as
    the table's last committed row."""
    path = tmp_path_factory.mktemp("store") / "s"
    table = ToastTable(doc_size=3_000)
    committed_rows: dict[int, dict[str, Any]] = {}
    task = _task(path)
    offset = 0
    for key, action in steps:
        if action == "commit":
            _commit(task, offset)
            committed_rows = {k: dict(v) for k, v in table.rows.items()}
        elif action == "crash":
            task.close()
            table.rows = {k: dict(v) for k, v in committed_rows.items()}
            task = _task(path)
        else:
            if action == "delete" and key in table.rows:
                record = table.delete(key)
                table.rows.pop(key, None)
            elif key not in table.rows:
                record = table.insert(key)
            else:
                record = table.update(key, touch_doc=action == "touch")
            _feed(task, [record], first=offset)
            offset += 1
        _check_store(task, committed_rows)
    _commit(task, offset)
    _check_store(task, table.rows)
    task.close()


def _check_store(task: Task, rows: dict[int, dict[str, Any]]) -> None:
    referenced = set()
    live = {}
    for key, state in task.store.items():
        for ref in state.image.refs() if type(state.image) is LazyImage else ():
            referenced.add(store_key(key, ref.digest))
        if state.image is not None and not state.deleted:
            live[key] = state
    assert set(task.store.keys_with_prefix(b"\x00\x01")) == referenced
    for k, row in rows.items():
        key = state_key("t", f'{{"id":{k}}}')
        stored = task.store.get_raw(key)
        assert stored is not None
        assert dict(task.states.log.decode(key, stored).image) == row
    assert len(live) == len(rows)


def test_image_bytes_counts_what_a_row_holds() -> None:
    image = {"id": 1, "name": "ab", "doc": "x" * 5000, "tags": ["abc", "de"], "raw": b"1234"}
    assert image_bytes(image) == 16 + 2 + 5000 + (3 + 2 + 16) + 4
    lazy = LazyImage({"id": 1, "doc": LargeValue(b"d" * 16, 7000)}, UnreadableValues())
    assert image_bytes(lazy) == 16 + 7000
    assert image_bytes(None) == 0

"""The group every record is shuffled by: one group per (input topic, canonical key).

The group of an input record is its canonical key as the run's codec names it
(`Hydrator.route`, here and only here; the group function hands it to the core). Handoff records
are keyed by the new key's group already. Records without identity are grouped per
topic-partition (hydrated statelessly, in order); records whose key cannot be decoded likewise
(they become dead letters in the group function). A handoff-topic record with no key is a tick:
it only makes Spark run a batch, and with it the processing-time timeouts.

`routed` is one `mapInArrow` pass before the shuffle: it reads the Kafka source's Arrow columns
as plain Python lists, computes each record's group and packs the record into one binary column
(ROUTED_SCHEMA). applyInPandasWithState pays a fixed cost per group and *column* (each group's
slice of every column becomes a pandas Series), so the group function gets two columns instead
of the source's seven. The headers reach Python as JSON text (`to_json`, values base64): Spark
4.x measures the Arrow batch it sends to Python after every row, and for a list column that
measure walks the whole batch, which made writing the source's `headers` quadratic per batch.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from typing import Any

import msgpack
import orjson
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from hydrator.core import RawRecord
from hydrator.engines.spark.stateful import (
    KIND_BOOTSTRAP,
    KIND_HANDOFF,
    KIND_INPUT,
    RESELECTED_SUFFIX,
    HydratorSpec,
    hydrator_for,
)

KEYLESS = "\x01"
UNDECODABLE = "\x02"
TICK = "\x03tick"
STATELESS_PREFIXES = (KEYLESS, UNDECODABLE, TICK)

# group: the shuffle key; record: msgpack [kind, partition, offset, topic, key, value, headers,
# timestamp] with headers a list of (name, value) pairs or None (stateful.unpack_record).
ROUTED_SCHEMA = StructType(
    [StructField("group", StringType()), StructField("record", BinaryType())]
)
_ROUTED_ARROW = pa.schema([("group", pa.string()), ("record", pa.binary())])
_SOURCE_COLUMNS = ("topic", "partition", "offset", "key", "value", "headers", "timestamp")


def routed(
    records: DataFrame, spec: HydratorSpec, handoff_topic: str, bootstrap_topic: str | None = None
) -> DataFrame:
    """SOURCE_SCHEMA rows (Kafka source) to ROUTED_SCHEMA rows, ready for groupBy("group")."""
    projected = records.select(
        *_SOURCE_COLUMNS[:5], F.to_json("headers").alias("headers"), "timestamp"
    )
    return projected.mapInArrow(route(spec, handoff_topic, bootstrap_topic), ROUTED_SCHEMA)


def _headers(text: str | None) -> list[tuple[str, bytes | None]] | None:
    """`to_json(headers)` back to (name, value) pairs; a null value is left out of the JSON."""
    if text is None:
        return None
    return [
        (cell["key"], base64.b64decode(cell["value"]) if "value" in cell else None)
        for cell in orjson.loads(text)
    ]


def group_of(hydrator: Any, record: RawRecord) -> str:
    """The group of an input-topic record (not a handoff): its canonical key, the same the
    group function passes to the core."""
    routed = hydrator.route(record)
    topic, partition = record.topic, record.partition
    if isinstance(routed, str):
        return f"{topic}\x00{routed}"
    prefix = KEYLESS if routed is None else UNDECODABLE
    return f"{prefix}{topic}\x00{partition}"


def route(
    spec: HydratorSpec, handoff_topic: str, bootstrap_topic: str | None = None
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """`mapInArrow` function: SOURCE_SCHEMA batches (headers as JSON text) in, ROUTED_SCHEMA
    batches out."""

    def route_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        hydrator = hydrator_for(spec)
        by_record_key = hydrator.codec.key_in_record_key
        pack = msgpack.Packer(use_bin_type=True).pack
        for batch in batches:
            columns = [batch.column(name).to_pylist() for name in _SOURCE_COLUMNS]
            groups: list[str] = []
            records: list[bytes] = []
            known: dict[tuple[str, bytes], str] = {}  # keys repeat within a batch
            for topic, partition, offset, key, value, headers, timestamp in zip(
                *columns, strict=True
            ):
                if topic == bootstrap_topic:
                    # keyed by its group, as a handoff is (hydrator/bootstrap/spark.py); a
                    # re-select's record by its group and a suffix (reselect.py)
                    kind = KIND_BOOTSTRAP
                    group = key.decode("utf-8", "replace") if key is not None else TICK
                    group = group.removesuffix(RESELECTED_SUFFIX)
                elif topic == handoff_topic:
                    kind = KIND_HANDOFF
                    # a handoff's key is its group; bytes someone else wrote there still
                    # get one (the group function dead-letters what does not decode)
                    group = key.decode("utf-8", "replace") if key is not None else TICK
                else:
                    kind = KIND_INPUT
                    cached = by_record_key and key is not None
                    group = known.get((topic, key)) if cached else None
                    if group is None:
                        record = RawRecord(topic, partition, offset, key, value)
                        group = group_of(hydrator, record)
                        if cached and not group.startswith((KEYLESS, UNDECODABLE)):
                            known[(topic, key)] = group
                groups.append(group)
                records.append(
                    pack((kind, partition, offset, topic, key, value, _headers(headers), timestamp))
                )
            yield pa.RecordBatch.from_arrays(
                [pa.array(groups, pa.string()), pa.array(records, pa.binary())],
                schema=_ROUTED_ARROW,
            )

    return route_batches

"""Debezium's `ExtractNewRecordState` SMT applied to the Debezium model's records (its 3.x code):
a create/update/read becomes its `after` row, a delete its `before` row with `__deleted:
"true"` (`delete.tombstone.handling.mode=rewrite`) or a tombstone (`tombstone`, the default,
which also drops the connector's own tombstones; `rewrite` drops them too), plus the
`add.fields` as `__<field>`. Headers stay as they were."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from hydrator.events import RawRecord
from tests.support.debezium_model import DebeziumModel, Rendered, payload_of

ADD_FIELDS = ("op", "lsn", "source.sequence")


def flatten(value: bytes | None, deletes: str = "rewrite") -> bytes | bool | None:
    """The SMT's value for a Debezium JSON value; False when the SMT drops the record."""
    if value is None:
        return False  # the connector's tombstones: dropped by `rewrite` and by `tombstone`
    payload = payload_of(value)
    op = payload["op"]
    if op == "d" and deletes == "tombstone":
        return None
    row = dict(payload["before"] if op == "d" else payload["after"])
    source = payload["source"]
    row["__op"] = op
    row["__lsn"] = source["lsn"]
    row["__source_sequence"] = source["sequence"]
    if deletes == "rewrite":
        row["__deleted"] = "true" if op == "d" else "false"
    return orjson.dumps(row)


def full_row(full_value: dict[str, Any]) -> dict[str, Any]:
    """What a REPLICA IDENTITY FULL table's flattened row holds (its `__` fields aside)."""
    return dict(full_value["before"] if full_value["op"] == "d" else full_value["after"])


@dataclass
class FlatLog:
    """The model's log as the SMT turns it out."""

    log: list[Rendered] = field(default_factory=list)

    @classmethod
    def of(cls, model: DebeziumModel, deletes: str = "rewrite") -> FlatLog:
        out = cls()
        for rendered in model.log:
            record = rendered.default
            flat = flatten(record.value, deletes)
            if flat is False:
                continue
            if deletes == "tombstone" and rendered.duplicate:
                # A tombstone carries no position, nor does the key-change handoff it sends:
                # redelivered after a connector restart, a tombstone deletes the row again and a
                # late copy of its handoff can fill a redelivered CREATE (docs/formats.md says
                # so, and recommends `rewrite`). Only `rewrite` streams are tested with them.
                continue
            assert flat is None or isinstance(flat, bytes)
            again = RawRecord(
                record.topic, record.partition, record.offset, record.key, flat, record.headers
            )
            out.log.append(
                Rendered(again, rendered.full_value, rendered.key_id, rendered.duplicate)
            )
        return out

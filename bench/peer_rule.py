"""The peer's hydration rule, pure: what the Quix Streams application (quix_app.py) does to each
event, and what `python -m bench core --floor` times as the floor of any core on this workload.

Fill every column of `after` that holds the placeholder from the stored row, fill a null
`before` with the stored row, drop an event at or before the stored position (`source.lsn`).
One parse and one dump of the whole event, a dict lookup and a loop over the columns: the least
a hydrator that reads and writes JSON documents can do.

Imports only orjson: quix_app.py runs in the bench's own virtualenv, and imports this file as a
sibling module.
"""

from __future__ import annotations

from typing import Any

import orjson

PLACEHOLDER = "__debezium_unavailable_value"


def hydrate(value: bytes, stored: Any) -> tuple[bytes | None, Any]:
    """(the output, or None for a dropped event; what to store, or None to keep `stored`).
    `stored` is what an earlier call returned to store, or None."""
    event = orjson.loads(value)
    after = event.get("after")
    if after is None:
        return value, None
    position = event["source"]["lsn"]
    if stored is not None:
        if position <= stored["lsn"]:
            return None, None
        row = stored["row"]
        for column, cell in after.items():
            if cell == PLACEHOLDER and column in row:
                after[column] = row[column]
        if event.get("before") is None:
            event["before"] = row
    return orjson.dumps(event), {"lsn": position, "row": after}

"""The group column every row is shuffled by: one group per (input topic, canonical key).

Handoff records are keyed by the new key's group already. Records with no key are grouped per
topic-partition (hydrated statelessly, in order); records whose key cannot be decoded likewise
(they become dead letters in the group function). A handoff-topic record with no key is a tick:
it only makes Spark run a batch, and with it the processing-time timeouts.
"""

from __future__ import annotations

import pandas as pd
from pyspark.sql import Column
from pyspark.sql.functions import pandas_udf
from pyspark.sql.types import StringType

from hydrator.core import HydrationSettings, RawRecord
from hydrator.engines.spark.stateful import KIND_HANDOFF, hydrator_for

KEYLESS = "\x01"
UNDECODABLE = "\x02"
TICK = "\x03tick"
STATELESS_PREFIXES = (KEYLESS, UNDECODABLE, TICK)


def group_key(settings: HydrationSettings, format: str) -> callable:
    @pandas_udf(StringType())  # type: ignore[call-overload]
    def route(kind: pd.Series, topic: pd.Series, partition: pd.Series, key: pd.Series) -> pd.Series:
        hydrator = hydrator_for(settings, format)
        groups = []
        for kind_, topic_, partition_, key_ in zip(
            kind.tolist(), topic.tolist(), partition.tolist(), key.tolist(), strict=True
        ):
            if kind_ == KIND_HANDOFF:
                groups.append(key_.decode() if key_ is not None else TICK)
                continue
            routed = hydrator.route(RawRecord(topic_, partition_, 0, key_, None))
            if isinstance(routed, str):
                groups.append(f"{topic_}\x00{routed}")
            else:
                prefix = KEYLESS if routed is None else UNDECODABLE
                groups.append(f"{prefix}{topic_}\x00{partition_}")
        return pd.Series(groups, dtype=object)

    return route


def group_column(settings: HydrationSettings, format: str) -> Column:
    from pyspark.sql import functions as F

    route = group_key(settings, format)
    return route(F.col("kind"), F.col("topic"), F.col("partition"), F.col("key"))

"""How many keys are parked waiting for a key-change handoff, read from the query's state store
(Spark's state data source), with the earliest moment one of them times out."""

from __future__ import annotations

import pandas as pd
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.functions import pandas_udf
from pyspark.sql.types import LongType
from pyspark.sql.utils import AnalysisException

from state.codec import decode_state


@pandas_udf(LongType())  # type: ignore[call-overload]
def _parked_since(records: pd.Series) -> pd.Series:
    """waiting_since_ms of a parked state record, null otherwise."""
    since = []
    for data in records.tolist():
        state = decode_state(data) if data is not None else None
        since.append(state.waiting_since_ms if state is not None and state.is_parked else None)
    return pd.Series(since, dtype="Int64")


def parked_summary(
    spark: SparkSession, checkpoint: str, handoff_timeout_ms: int
) -> tuple[int, int | None]:
    """(parked keys, earliest timeout deadline in ms) of the last committed batch."""
    try:
        states = spark.read.format("statestore").load(checkpoint)
    except AnalysisException:
        return 0, None  # no batch has committed state yet
    since = states.select(_parked_since(F.col("value.groupState.record")).alias("since")).where(
        F.col("since").isNotNull()
    )
    row = since.agg(F.count("since").alias("n"), F.min("since").alias("first")).first()
    if row is None or not row["n"]:
        return 0, None
    return int(row["n"]), int(row["first"]) + handoff_timeout_ms

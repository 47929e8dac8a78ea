"""What the query's state store holds, read through Spark's state data source: how many keys are
parked waiting for a key-change handoff, with the earliest moment one of them times out; the
earliest timeout Spark has armed for any key (when the driver must make a batch run); and, for
the metrics' starting point, the bytes of its keys and encoded states."""

from __future__ import annotations

import pandas as pd
from pyspark.errors import SparkRuntimeException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.functions import pandas_udf
from pyspark.sql.types import LongType
from pyspark.sql.utils import AnalysisException

from state.codec import decode_state

NO_COMMITTED_BATCH = "STDS_COMMITTED_BATCH_UNAVAILABLE"
RECORD = "value.groupState.record"
TIMEOUT = "value.timeoutTimestamp"  # wall clock, ms; -1: none armed


@pandas_udf(LongType())  # type: ignore[call-overload]
def _parked_since(records: pd.Series) -> pd.Series:
    """waiting_since_ms of a parked state record, null otherwise."""
    since = []
    for data in records.tolist():
        state = decode_state(data) if data is not None else None
        since.append(state.waiting_since_ms if state is not None and state.is_parked else None)
    return pd.Series(since, dtype="Int64")


def _states(spark: SparkSession, checkpoint: str) -> DataFrame | None:
    """The state rows of the last committed batch; None before any batch committed."""
    try:
        return spark.read.format("statestore").load(checkpoint)
    except AnalysisException:
        return None  # no batch has committed state yet
    except SparkRuntimeException as exc:
        if exc.getCondition() == NO_COMMITTED_BATCH:  # a new checkpoint: no batch has run
            return None
        raise


def parked_summary(
    spark: SparkSession, checkpoint: str, handoff_timeout_ms: int
) -> tuple[int, int | None]:
    """(parked keys, earliest timeout deadline in ms) of the last committed batch."""
    states = _states(spark, checkpoint)
    if states is None:
        return 0, None
    since = states.select(_parked_since(F.col(RECORD)).alias("since")).where(
        F.col("since").isNotNull()
    )
    row = since.agg(F.count("since").alias("n"), F.min("since").alias("first")).first()
    if row is None or not row["n"]:
        return 0, None
    return int(row["n"]), int(row["first"]) + handoff_timeout_ms


def earliest_timeout(spark: SparkSession, checkpoint: str) -> int | None:
    """The earliest processing-time timeout armed in the last committed batch's state, as Spark
    keeps it (wall clock, ms); None when none is."""
    states = _states(spark, checkpoint)
    if states is None:
        return None
    row = states.where(F.col(TIMEOUT) >= 0).agg(F.min(TIMEOUT).alias("first")).first()
    return None if row is None or row["first"] is None else int(row["first"])


def stored_totals(spark: SparkSession, checkpoint: str) -> tuple[int, int]:
    """(parked keys, bytes of the keys and encoded states) of the last committed batch, in one
    pass; what the group function's reported changes add to."""
    states = _states(spark, checkpoint)
    if states is None:
        return 0, 0
    row = states.select(
        F.count(_parked_since(F.col(RECORD))).alias("parked"),
        F.sum(F.octet_length(F.col("key.group")) + F.octet_length(F.col(RECORD))).alias("bytes"),
    ).first()
    if row is None:
        return 0, 0
    return int(row["parked"] or 0), int(row["bytes"] or 0)

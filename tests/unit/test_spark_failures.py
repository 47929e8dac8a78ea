"""A temporary failure raised in a Spark worker, found in the query's error text
(hydrator/engines/spark/failures.py)."""

from __future__ import annotations

from hydrator.engines.spark.failures import WorkerTemporaryFailure, temporary_failure_in
from hydrator.errors import EXIT_TEMPORARY, exit_code_for

# The shape a StreamingQueryException's text has when a Python worker raised: Spark's own
# lines, then the worker's traceback.
WORKER_TRACEBACK = """[STREAM_FAILED] Query [id = 5d0c, runId = 9e1f] terminated with exception: \
Job aborted due to stage failure: Task 0 in stage 3.0 failed 1 times, most recent failure: \
Lost task 0.0 in stage 3.0 (TID 7) (127.0.0.1 executor driver): \
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/pyspark/worker.py", line 1880, in main
    process()
  File "/work/hydrator/formats/registry.py", line 135, in _fetch
    raise Unavailable(
hydrator.events.Unavailable: schema registry at http://127.0.0.1:4711 did not answer within 4 s \
(reading schema id 3); last error: ConnectError: [Errno 111] Connection refused

\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(...)
"""


def test_a_workers_registry_outage_is_a_temporary_failure() -> None:
    found = temporary_failure_in(WORKER_TRACEBACK)
    assert found == (
        "Unavailable: schema registry at http://127.0.0.1:4711 did not answer within 4 s "
        "(reading schema id 3); last error: ConnectError: [Errno 111] Connection refused"
    )
    assert exit_code_for(WorkerTemporaryFailure(found)) == EXIT_TEMPORARY


def test_other_worker_failures_stay_fatal() -> None:
    assert temporary_failure_in(WORKER_TRACEBACK.replace("Unavailable", "BadInput")) is None
    assert temporary_failure_in("ValueError: something else") is None
    assert temporary_failure_in("hydrator.no_such_module.Thing: nope") is None
    assert temporary_failure_in("hydrator.events.NoSuchName: nope") is None

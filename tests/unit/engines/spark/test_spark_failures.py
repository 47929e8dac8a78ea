"""A deliberate stop or a temporary failure raised in a Spark worker, found in the query's error
text (hydrator/engines/spark/failures.py)."""

from __future__ import annotations

from hydrator.core.settings import UnresolvedColumnsError
from hydrator.engines.spark.failures import (
    WorkerTemporaryFailure,
    driver_error,
    replayed_batch_report_failed,
    summary,
)
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
    found = driver_error(WORKER_TRACEBACK)
    assert type(found) is WorkerTemporaryFailure
    assert str(found) == (
        "Unavailable: schema registry at http://127.0.0.1:4711 did not answer within 4 s "
        "(reading schema id 3); last error: ConnectError: [Errno 111] Connection refused"
    )
    assert exit_code_for(found) == EXIT_TEMPORARY


def test_other_worker_failures_stay_fatal() -> None:
    assert driver_error(WORKER_TRACEBACK.replace("Unavailable", "BadInput")) is None
    assert driver_error("ValueError: something else") is None
    assert driver_error("hydrator.no_such_module.Thing: nope") is None
    assert driver_error("hydrator.events.NoSuchName: nope") is None


def _worker_raised(line: str) -> str:
    """WORKER_TRACEBACK with the worker's last line replaced by `line`."""
    head, _, rest = WORKER_TRACEBACK.partition("hydrator.events.Unavailable:")
    return head + line + "\n\n" + rest.partition("\n\n")[2]


def test_on_unresolved_fail_in_a_worker_ends_the_run_as_in_the_embedded_engine() -> None:
    text = _worker_raised(
        "hydrator.core.settings.UnresolvedColumnsError: t:0:0: unresolved columns doc "
        "(--on-unresolved fail)"
    )
    error = driver_error(text)
    assert type(error) is UnresolvedColumnsError
    assert str(error) == "t:0:0: unresolved columns doc (--on-unresolved fail)"
    assert exit_code_for(error) == exit_code_for(UnresolvedColumnsError("x"))
    assert summary(text) == (
        "UnresolvedColumnsError: t:0:0: unresolved columns doc (--on-unresolved fail)"
    )


def test_a_crash_keeps_its_trace_and_is_summed_up_by_its_first_line() -> None:
    crash = _worker_raised("ZeroDivisionError: division by zero")
    assert driver_error(crash) is None
    assert summary(crash) == crash.splitlines()[0]
    bad_input = _worker_raised("hydrator.events.BadInput: not JSON")
    assert driver_error(bad_input) is None  # a record's fault is a dead letter, never a stop
    assert summary(bad_input) == "BadInput: not JSON"


def test_the_connectors_failed_report_of_a_replayed_batch_is_told_apart() -> None:
    message = (
        'java.lang.NullPointerException: Cannot invoke "scala.collection.IterableOps.map('
        'scala.Function1)" because the return value of "scala.Option.get()" is null'
    )
    trace = "\tat org.apache.spark.sql.kafka010.KafkaMicroBatchStream$.metrics(...)"
    assert replayed_batch_report_failed(f"{message}\n{trace}")
    assert not replayed_batch_report_failed(message)  # elsewhere: not that failure
    assert not replayed_batch_report_failed("hydrator.events.Unavailable: registry down")

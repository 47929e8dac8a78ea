"""Broker outages, injected by a TCP proxy in front of a broker of the test's own.

Every client reaches the broker through the proxy (the broker advertises the proxy's port), and
the proxy cuts every connection and refuses new ones for a while:

* a 20 s and a 90 s cut while a stream is being hydrated: the engine recovers by itself (the
  test never restarts it), loses nothing, repeats nothing and hydrates nothing wrongly (on
  Tansu a transaction the outage broke can stay visible, so a record may come out twice as an
  identical copy: tests/harness/exactly_once.py);
* SIGTERM during a cut ends the process within a bounded time;
* a broker that is not there at start-up is waited for (one line per attempt) and used once it
  appears; one that never appears ends the run after --startup-timeout with exit code 75.

The 90 s cut takes about two minutes; it runs unless HYDRATOR_SKIP_LONG_OUTAGE is set.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hydrator.demo.stream import ChangeRecord, DemoStream
from hydrator.engines.embedded.watchdog import EXIT_TEMPORARY
from hydrator.kafka.apache_kafka import ApacheKafka
from hydrator.kafka.local_broker import LocalBroker, free_port
from tests.harness.exactly_once import app_repeats
from tests.harness.hydrator_process import (
    HydratorProcess,
    run_args,
    run_to_completion,
    wait_until_committed,
)
from tests.harness.kafka import APACHE_KAFKA, TANSU, Broker, own_broker
from tests.harness.proxy import TcpProxy
from tests.harness.stream_checks import check_hydrated, copies_by_source
from tests.harness.topics import (
    BackgroundProducer,
    Consumed,
    Headers,
    create_topic,
    produce,
    read_topic,
)

pytestmark = pytest.mark.integration

PARTITIONS = 4
SEED = 20251123
ASSIGNED = r"assigned partitions \[0, 1, 2, 3\]"
# Faster group membership changes, as in the crash test; the outage is the point here.
FAST_GROUP = [
    "-X",
    "consumer.session.timeout.ms=3000",
    "-X",
    "consumer.heartbeat.interval.ms=500",
]
# One process (--workers 1) where a test follows one engine through a cut: its in-process
# restart, its log, its partitions. Each worker of a run with several recovers the same way.
ONE_PROCESS = ["--workers", "1"]


class ProxiedBroker:
    def __init__(self, proxy: TcpProxy, broker: ApacheKafka | LocalBroker) -> None:
        self.proxy = proxy
        kind = APACHE_KAFKA if isinstance(broker, ApacheKafka) else TANSU
        self.seen_as = Broker(proxy.address, kind)  # as its clients see it

    @property
    def bootstrap_servers(self) -> str:
        return self.proxy.address


@pytest.fixture(scope="module")
def proxied_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxiedBroker]:
    """A broker of the module's own (the session's kind) that every client reaches through the
    proxy: it advertises the proxy's port."""
    broker_port, proxy_port = free_port(), free_port()
    with (
        TcpProxy(broker_port, port=proxy_port) as proxy,
        own_broker(
            tmp_path_factory.mktemp("proxied"), port=broker_port, advertised_port=proxy_port
        ) as broker,
    ):
        yield ProxiedBroker(proxy, broker)


@pytest.mark.parametrize(
    "cut_s",
    [
        20,
        pytest.param(
            90,
            marks=pytest.mark.skipif(
                bool(os.environ.get("HYDRATOR_SKIP_LONG_OUTAGE")),
                reason="HYDRATOR_SKIP_LONG_OUTAGE is set",
            ),
        ),
    ],
)
def test_the_engine_recovers_from_an_outage_by_itself(
    proxied_broker: ProxiedBroker, unique_name: str, tmp_path: Path, cut_s: int
) -> None:
    bootstrap = proxied_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, PARTITIONS)
    records = DemoStream(seed=SEED, keys=500, toast_size=100).records(12_000)
    args = run_args(
        bootstrap,
        unique_name,
        [source],
        tmp_path / "state",
        *FAST_GROUP,
        *ONE_PROCESS,
        output_topic=output,
    )

    with HydratorProcess(args, tmp_path / "run.log") as process:
        process.wait_for_log(ASSIGNED, timeout_s=60)
        # The stream flows before, during (buffered in the producer) and after the cut.
        producing = BackgroundProducer(bootstrap, source, _tuples(records), seconds=25)
        producing.start()
        time.sleep(5)
        assert process.process.poll() is None, process.log
        proxied_broker.proxy.cut(cut_s)
        time.sleep(cut_s)
        placed = producing.join()
        wait_until_committed(bootstrap, unique_name, source, process, timeout_s=180)
        pid = process.process.pid
        assert process.terminate(timeout_s=60) == 0, process.log
        log = process.log

    assert pid == process.process.pid  # one process throughout: no restart by the test
    assert "Traceback" not in log, log
    if cut_s >= 60:
        # The group dropped the engine during the cut and it came back: by restarting itself
        # when the cut broke an open transaction, by rejoining when it fell between batches.
        assert "partitions lost" in log, log
        assert len(re.findall(ASSIGNED, log)) >= 2, log
    # librdkafka's connection chatter is held back: a handful of lines per kind, not hundreds.
    assert len(log.splitlines()) < 400, f"{len(log.splitlines())} log lines"

    outputs = read_topic(bootstrap, output, timeout_s=60)
    _check(outputs, records, placed, source)
    app_repeats(proxied_broker.seen_as, unique_name, [output])


def test_sigterm_during_a_cut_ends_the_process(
    proxied_broker: ProxiedBroker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = proxied_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, PARTITIONS)
    records = DemoStream(seed=SEED, keys=200, toast_size=100).records(4000)
    args = run_args(
        bootstrap,
        unique_name,
        [source],
        tmp_path / "state",
        *FAST_GROUP,
        *ONE_PROCESS,
        output_topic=output,
    )
    with HydratorProcess(args, tmp_path / "run.log") as process:
        process.wait_for_log(ASSIGNED, timeout_s=60)
        producing = BackgroundProducer(bootstrap, source, _tuples(records), seconds=10)
        producing.start()
        time.sleep(3)
        proxied_broker.proxy.cut(60)
        try:
            time.sleep(5)
            began = time.monotonic()
            code = process.terminate(timeout_s=45)
            took = time.monotonic() - began
        finally:
            proxied_broker.proxy.restore()
        producing.join()
    assert code in (0, 130), process.log
    assert took < 45, process.log
    print(f"SIGTERM during a cut: exit {code} after {took:.1f} s")


def test_a_broker_that_is_late_at_start_up_is_waited_for(
    proxied_broker: ProxiedBroker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = proxied_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, 1)
    records = DemoStream(seed=SEED, keys=20, toast_size=100).records(100)
    placed = produce(bootstrap, source, [(r.key, r.value, list(r.headers)) for r in records])
    args = run_args(
        bootstrap, unique_name, [source], tmp_path / "state", "--available-now", output_topic=output
    )
    waiting = r"no broker answers at --bootstrap-servers \S+ \(attempt \d+"
    proxied_broker.proxy.cut(120)
    try:
        with HydratorProcess(args, tmp_path / "run.log") as process:
            # the broker comes once the engine has said it waits for it, however slow its start
            process.wait_for_log(waiting, timeout_s=90)
            time.sleep(3)
            proxied_broker.proxy.restore()
            assert process.wait(timeout_s=120) == 0, process.log
            log = process.log
    finally:
        proxied_broker.proxy.restore()
    assert 1 <= len(re.findall(waiting, log)) <= 6, log
    assert "%3|" not in log and "Traceback" not in log, log
    _check(read_topic(bootstrap, output), records, placed, source)


def test_no_broker_at_start_up_ends_the_run_after_the_startup_timeout(
    unique_name: str, tmp_path: Path
) -> None:
    nowhere = f"127.0.0.1:{free_port()}"
    args = run_args(
        nowhere,
        unique_name,
        ["in"],
        tmp_path / "state",
        "--startup-timeout",
        "6s",
        output_topic="out",
    )
    began = time.monotonic()
    done = run_to_completion(args, timeout_s=60)
    took = time.monotonic() - began
    assert done.returncode == EXIT_TEMPORARY, done.stderr
    assert took < 30, took
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith(f"Error: no broker answered at --bootstrap-servers {nowhere}")
    assert "--startup-timeout" in lines[-1]
    assert len(lines) <= 8, done.stderr  # one line per attempt, not librdkafka's hundreds
    assert "Traceback" not in done.stderr


# -- helpers ----------------------------------------------------------------------------------


def _check(
    outputs: list[Consumed], records: list[ChangeRecord], placed: list[tuple[int, int]], source: str
) -> None:
    """Every input hydrated correctly (repeats: tests/harness/exactly_once.py)."""
    truth, copies = copies_by_source(outputs, records, placed, source)
    for src, outs in copies.items():
        check_hydrated(src, outs[0], truth[src])


def _tuples(records: list[ChangeRecord]) -> list[tuple[bytes | None, bytes | None, Headers]]:
    return [(r.key, r.value, list(r.headers)) for r in records]

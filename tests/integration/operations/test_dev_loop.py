"""The local dev loop as a user drives it, each step its own process: `hydrator dev broker`,
`hydrator dev capture` on their own Postgres table (real Debezium), `hydrator run
--available-now`, then `hydrator tail` showing full rows and `hydrator tail --dlq` a dead
letter's reason; Ctrl-C stops the broker and the capture with exit 0, no traceback, and nothing
left in the database."""

from __future__ import annotations

import os
import queue
import random
import signal
import socket
import string
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Producer

from hydrator.kafka.local_broker import free_port
from tests.harness.hydrator_process import cli_command, run_to_completion
from tests.harness.kafka import KAFKA_HOME_VARIABLE, kafka_home
from tests.harness.readme import readme_commands
from tests.harness.topics import create_topic, read_topic

if TYPE_CHECKING:
    from tests.harness.kafka import Broker
    from tests.harness.postgres import PgDatabase

pytestmark = pytest.mark.integration

ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}
BIO = 3000


class _Running:
    """A long-running `hydrator ARGS` whose output lines are read as they come."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            cli_command(list(args)),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=ENV,
        )
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, text: str, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while True:
            for line in self.lines:
                if text in line:
                    return line
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no {text!r} in:\n" + "\n".join(self.lines))
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(
                    f"exited ({self.process.wait()}) before {text!r}:\n" + "\n".join(self.lines)
                )
            self.lines.append(line)

    def interrupt(self, timeout_s: float = 60) -> tuple[int, str]:
        """Ctrl-C: SIGINT, as a terminal sends it; the exit code and everything printed."""
        self.process.send_signal(signal.SIGINT)
        code = self.process.wait(timeout_s)
        while (line := self._queue.get(timeout=5)) is not None:
            self.lines.append(line)
        return code, "\n".join(self.lines)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def dev_broker() -> Iterator[tuple[_Running, str]]:
    port = free_port()
    broker = _Running("dev", "broker", "--port", str(port))
    try:
        line = broker.wait_for("bootstrap servers", 60)
        assert line.endswith(f"127.0.0.1:{port}")
        yield broker, f"127.0.0.1:{port}"
    finally:
        broker.kill()


def _bio(rng: random.Random) -> str:
    # random letters: pglz cannot shrink them below the TOAST threshold
    return "".join(rng.choices(string.ascii_letters, k=BIO))


def test_dev_loop_from_broker_to_tail(
    dev_broker: tuple[_Running, str], postgres: PgDatabase, tmp_path: Path
) -> None:
    broker, bootstrap = dev_broker
    rng = random.Random(29)
    with postgres.connect() as conn:
        conn.execute("CREATE TABLE customers (id int PRIMARY KEY, name text, bio text)")
        conn.execute("INSERT INTO customers VALUES (1, 'Ada', %s)", (_bio(rng),))

    capture = _Running(
        "dev",
        "capture",
        "--dsn",
        postgres.dsn,
        "--table",
        "public.customers",
        "--bootstrap-servers",
        bootstrap,
        "--every",
        "1",
    )
    try:
        capture.wait_for("capturing public.customers into topic dev.public.customers", 60)
        capture.wait_for("Debezium holds slot", 120)
        with postgres.connect() as conn:
            # bio untouched: Debezium ships the placeholder, the hydrator fills it
            conn.execute("UPDATE customers SET name = 'Ada Lovelace' WHERE id = 1")
            conn.execute("INSERT INTO customers VALUES (2, 'Grace', %s)", (_bio(rng),))
            conn.execute("UPDATE customers SET name = 'Grace Hopper' WHERE id = 2")
        # the snapshot's row 1, then three changes
        capture.wait_for("4 records written to dev.public.customers", 60)
        # a stray record on the topic: the hydrator dead-letters it, saying why
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.produce("dev.public.customers", b"not a change event", b'{"id":3}', partition=0)
        assert producer.flush(30) == 0

        # `hydrator run` exactly as the README shows it (and `dev capture` printed it), on this
        # test's broker, its state in the user's state directory (here, under tmp_path)
        (readme_run,) = readme_commands("A dev loop on your own table", "run")
        printed = capture.wait_for("hydrate it with: ", 5).split("hydrate it with: ", 1)[1]
        assert printed == readme_run.replace("127.0.0.1:9092", bootstrap)
        done = run_to_completion(
            printed.split()[1:], timeout_s=180, env={"XDG_STATE_HOME": str(tmp_path / "xdg")}
        )
        assert done.returncode == 0, done.stdout + done.stderr
        _assert_quiet(done.stdout + done.stderr)
        state = tmp_path / "xdg" / "toast-hydrator" / "toast-hydrator"
        assert f"local state in {state} (--state-dir" in done.stderr
        assert state.is_dir() and not (tmp_path / "hydrator-state").exists()

        enriched = run_to_completion(
            ["tail", "dev.public.customers.enriched", "--bootstrap-servers", bootstrap],
            timeout_s=60,
        )
        assert enriched.returncode == 0, enriched.stdout + enriched.stderr
        assert "(4 records)" in enriched.stderr
        shown = enriched.stdout
        assert "__debezium_unavailable_value" not in shown
        assert shown.count(f"({BIO} chars)") == 6  # r: after; c: after; u, u: before and after
        assert shown.count("hydrator.filled: bio") == 2
        assert shown.count("hydrator.source: dev.public.customers:0:") == 4
        assert '"name": "Ada Lovelace"' in shown and '"name": "Grace Hopper"' in shown
        # hydrator.* headers come before Debezium's own
        first = shown.split("\n\n")[0].splitlines()
        assert first[1].startswith("hydrator.")

        dead = run_to_completion(
            ["tail", "toast-hydrator-dlq", "--dlq", "--bootstrap-servers", bootstrap, "--max", "1"],
            timeout_s=60,
        )
        assert dead.returncode == 0, dead.stdout + dead.stderr
        lines = dead.stdout.splitlines()
        assert lines[0].startswith('── toast-hydrator-dlq [0] @0  key {"id": 3}')
        assert lines[1].startswith("reason: ") and len(lines[1]) > len("reason: ") + 5
        assert lines[2] == "source: dev.public.customers:0:4"
        assert "(18 bytes, not JSON) b'not a change event'" in dead.stdout
    finally:
        code, output = capture.interrupt()
    assert code == 0, output
    assert "stopped: 4 records written to dev.public.customers" in output
    _assert_quiet(output)
    with postgres.connect() as conn:
        assert (
            conn.execute(
                "SELECT slot_name FROM pg_replication_slots WHERE database = current_database()"
            ).fetchall()
            == []
        )
        assert conn.execute("SELECT pubname FROM pg_publication").fetchall() == []

    code, output = broker.interrupt()
    assert code == 0, output
    assert output.splitlines()[-1] == "broker stopped"
    _assert_quiet(output)


def _assert_quiet(output: str) -> None:
    """A step of the first-hour path that worked shows no ERROR line and no traceback."""
    for breaker in ("ERROR", "Traceback", "|FAIL|", "%3|", "Failed to consume", "Exception"):
        assert breaker not in output, output


def test_capture_stopped_while_changes_stream_is_quiet(
    dev_broker: tuple[_Running, str], postgres: PgDatabase
) -> None:
    """Ctrl-C while Debezium hands batches over: closing the engine interrupts the batch in
    flight, which is the stop, not a failure: no ERROR line, no Java traceback, exit 0."""
    _, bootstrap = dev_broker
    with postgres.connect() as conn:
        conn.execute("CREATE TABLE busy (id int PRIMARY KEY, n int)")
        conn.execute("INSERT INTO busy SELECT g, 0 FROM generate_series(1, 50) g")
    capture = _Running(
        "dev", "capture", "--dsn", postgres.dsn, "--table", "busy", "--bootstrap-servers", bootstrap
    )
    writing = threading.Event()
    writing.set()

    def write() -> None:
        with postgres.connect() as conn:
            while writing.is_set():
                conn.execute("UPDATE busy SET n = n + 1")

    writer = threading.Thread(target=write, daemon=True)
    try:
        capture.wait_for("Debezium holds slot", 120)
        writer.start()
        capture.wait_for("records written to dev.public.busy", 60)
        time.sleep(2)
        code, output = capture.interrupt()
    finally:
        writing.clear()
        capture.kill()
    writer.join(30)
    assert code == 0, output
    assert "stopped: " in output
    _assert_quiet(output)


def test_capture_refuses_a_table_without_a_primary_key(
    postgres: PgDatabase, kafka_broker: Broker
) -> None:
    with postgres.connect() as conn:
        conn.execute("CREATE TABLE events (at timestamptz, what text)")
    for table, message in (
        ("public.events", "table public.events has no primary key"),
        ("public.missing", "no table public.missing in database"),
    ):
        done = run_to_completion(
            ["dev", "capture", "--dsn", postgres.dsn, "--table", table], timeout_s=60
        )
        assert done.returncode == 1, done.stdout + done.stderr
        assert message in done.stderr
        assert "Traceback" not in done.stderr


def test_tail_from_the_end_shows_only_new_records(kafka_broker: Broker, unique_name: str) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = f"{unique_name}-tail"
    from hydrator.demo.publish import create_topic

    create_topic(bootstrap, topic, 2)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(5):
        producer.produce(topic, b'{"old": %d}' % i, partition=i % 2)
    assert producer.flush(30) == 0
    tail = _Running("tail", topic, "--from-end", "--max", "1", "--bootstrap-servers", bootstrap)
    try:
        time.sleep(3)  # it has found the ends and waits
        producer.produce(topic, b'{"new": 1}', partition=1)
        assert producer.flush(30) == 0
        assert tail.process.wait(60) == 0
        tail.wait_for("(1 record)", 5)
        text = "\n".join(tail.lines)
        assert '"new": 1' in text and '"old"' not in text
    finally:
        tail.kill()


def test_tail_of_a_missing_topic_says_so(kafka_broker: Broker) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    done = run_to_completion(
        ["tail", "no-such-topic", "--bootstrap-servers", bootstrap], timeout_s=60
    )
    assert done.returncode == 1
    assert "topic 'no-such-topic' does not exist" in done.stderr


def test_capture_says_when_java_is_missing(postgres: PgDatabase, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"  # a PATH with no java on it
    bin_dir.mkdir()
    with postgres.connect() as conn:
        conn.execute("CREATE TABLE customers (id int PRIMARY KEY)")
    done = run_to_completion(
        ["dev", "capture", "--dsn", postgres.dsn, "--table", "customers"],
        timeout_s=60,
        env={"PATH": str(bin_dir)},
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Debezium cannot run: no java on PATH" in done.stderr
    assert "Traceback" not in done.stderr


def test_capture_and_tail_say_when_no_broker_answers(postgres: PgDatabase) -> None:
    with postgres.connect() as conn:
        conn.execute("CREATE TABLE customers (id int PRIMARY KEY)")
    nowhere = f"127.0.0.1:{free_port()}"
    for args in (
        ("dev", "capture", "--dsn", postgres.dsn, "--table", "customers"),
        ("tail", "dev.public.customers"),
    ):
        done = run_to_completion([*args, "--bootstrap-servers", nowhere], timeout_s=60)
        assert done.returncode == 1, done.stdout + done.stderr
        assert f"no broker answers at {nowhere}" in done.stderr
        assert "start one with `hydrator dev broker`" in done.stderr


def test_tail_follow_stops_on_ctrl_c(kafka_broker: Broker, unique_name: str) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = f"{unique_name}-follow"
    from hydrator.demo.publish import create_topic

    create_topic(bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, b'{"n": 1}', partition=0)
    assert producer.flush(30) == 0
    tail = _Running("tail", topic, "--follow", "--bootstrap-servers", bootstrap)
    try:
        tail.wait_for('"n": 1', 60)
        code, output = tail.interrupt()
        assert code == 0, output
        assert "(1 record)" in output and "Traceback" not in output
    finally:
        tail.kill()


def test_dev_broker_runs_apache_kafka_from_a_distribution(tmp_path: Path) -> None:
    """`dev broker --kafka-home DIR` runs that Kafka (transactions as a user's cluster has them),
    and Ctrl-C stops it cleanly, its data removed."""
    home = kafka_home()
    if home is None:
        pytest.skip(f"{KAFKA_HOME_VARIABLE} names no Apache Kafka distribution to run")
    port = free_port()
    broker = _Running("dev", "broker", "--kafka-home", str(home), "--port", str(port))
    try:
        broker.wait_for(f"bootstrap servers 127.0.0.1:{port}", 120)
        data = Path(broker.wait_for("removed when it stops", 5).split("data in ")[1].split(",")[0])
        assert data.is_dir()
        bootstrap = f"127.0.0.1:{port}"
        create_topic(bootstrap, "dev-kafka", 1)
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "dev-kafka"})
        producer.init_transactions(30)
        for commit in (False, True):
            producer.begin_transaction()
            producer.produce("dev-kafka", b"committed" if commit else b"aborted")
            producer.flush(30)
            (producer.commit_transaction if commit else producer.abort_transaction)(30)
        values = [r.value for r in read_topic(bootstrap, "dev-kafka", timeout_s=30)]
        assert values == [b"committed"]  # read_committed: the aborted record is not there

        code, output = broker.interrupt(timeout_s=60)
        assert code == 0, output
        assert "broker stopped" in output and "Traceback" not in output
        assert not data.exists()
        assert not _listening(port)
    finally:
        broker.kill()


@pytest.mark.parametrize("given_by", ["--kafka-home", "HYDRATOR_KAFKA_HOME"])
def test_dev_broker_refuses_a_directory_that_is_not_a_kafka_distribution(
    tmp_path: Path, given_by: str
) -> None:
    args, env = ["dev", "broker", "--port", "0"], {}
    if given_by == "--kafka-home":
        args += ["--kafka-home", str(tmp_path)]
    else:
        env = {"HYDRATOR_KAFKA_HOME": str(tmp_path)}
    done = run_to_completion(args, timeout_s=60, env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{given_by}: {tmp_path} is not an Apache Kafka distribution" in done.stderr
    assert "Traceback" not in done.stderr


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False

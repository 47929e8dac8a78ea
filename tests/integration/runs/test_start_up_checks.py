"""Start-up checks that come before anything is created on the broker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.harness.cdc_events import ToastTable
from tests.harness.hydrator_process import run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.topics import create_topic, produce, read_topic

pytestmark = pytest.mark.integration


def topic_names(bootstrap: str) -> set[str]:
    # all topics: asking for one by name would create it on Tansu
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics)


@pytest.mark.parametrize("engine", ["embedded", "spark"])
def test_an_unwritable_state_dir_is_exit_2_before_any_topic_is_created(
    kafka_broker: Broker, unique_name: str, tmp_path: Path, engine: str
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, 1)
    produce(bootstrap, source, [ToastTable().insert(1)])
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    args = run_args(
        bootstrap, unique_name, [source], blocker / "state", "--available-now", output_topic=output
    )
    args[args.index("embedded")] = engine
    done = run_to_completion(args, timeout_s=120)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "--state-dir" in done.stderr
    assert "Traceback" not in done.stderr
    created = {output, f"{unique_name}-handoff", f"{unique_name}-state", f"{unique_name}-dlq"}
    assert not created & topic_names(bootstrap)


@pytest.mark.parametrize("engine", ["embedded", "spark"])
@pytest.mark.parametrize("existing", ["inputs", "output", "handoff"])
def test_partition_counts_that_do_not_fit_are_exit_2_before_any_topic_is_created(
    kafka_broker: Broker, unique_name: str, tmp_path: Path, engine: str, existing: str
) -> None:
    """Both engines, one rule (hydrator/topology/broker.py): the inputs share one partition
    count, an existing output has at least as many partitions, an internal topic exactly."""
    bootstrap = kafka_broker.bootstrap_servers
    first, second = f"{unique_name}.a", f"{unique_name}.b"
    output, handoff = f"{unique_name}.out", f"{unique_name}-handoff"
    create_topic(bootstrap, first, 2)
    inputs = [first]
    if existing == "inputs":
        create_topic(bootstrap, second, 3)
        inputs.append(second)
        expected = (
            f"--input-topic: the topics must have one partition count ({first}=2, {second}=3)"
        )
    elif existing == "output":
        create_topic(bootstrap, output, 1)
        expected = f"--output-topic/--output-suffix: {output} has 1 partitions, fewer than the"
    else:
        create_topic(bootstrap, handoff, 3)
        expected = f"--application-id: its internal topic {handoff} has 3 partitions but the"
    args = run_args(
        bootstrap, unique_name, inputs, tmp_path / "state", "--available-now", output_topic=output
    )
    args[args.index("embedded")] = engine
    done = run_to_completion(args, timeout_s=120)
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.strip().splitlines()[-1].startswith(f"Error: {expected}"), done.stderr
    assert "Traceback" not in done.stderr
    assert f"{unique_name}-dlq" not in topic_names(bootstrap)


SECRET = "n0t-in-any-log two words"


@pytest.mark.parametrize("how", ["env", "config-file", "command-line-malformed"])
def test_secrets_reach_the_clients_and_no_log(
    kafka_broker: Broker, unique_name: str, tmp_path: Path, how: str
) -> None:
    """The recommended ways to give a secret (HYDRATOR_KAFKA_PROPERTY, the config file) work
    end to end; a malformed -X item is refused without showing it."""
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, 1)
    produce(bootstrap, source, [ToastTable().insert(1)])
    args = run_args(
        bootstrap, unique_name, [source], tmp_path / "state", "--available-now", output_topic=output
    )
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # On a PLAINTEXT listener librdkafka ignores SASL settings: what matters is that the value,
    # spaces included, is accepted and never printed.
    if how == "env":
        env["HYDRATOR_KAFKA_PROPERTY"] = f"sasl.username=svc\nsasl.password={SECRET}\n"
    elif how == "config-file":
        config = tmp_path / "run.toml"
        config.write_text(f'[run]\nkafka-property = ["sasl.password={SECRET}"]\n')
        args += ["--config", str(config)]
    else:
        args += ["-X", f"sasl.password {SECRET}"]  # a space instead of '='
    done = subprocess.run(
        [sys.executable, "-m", "hydrator.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    for part in ("n0t-in-any-log", "two words"):
        assert part not in done.stdout + done.stderr
    if how == "command-line-malformed":
        assert done.returncode == 2 and "--kafka-property" in done.stderr
    else:
        assert done.returncode == 0, done.stderr[-3000:]
        assert len(read_topic(bootstrap, output)) == 1


def test_a_mistyped_input_topic_is_exit_2_with_the_topic_meant(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    """As a misspelled HYDRATOR_* variable or config key does: the message names the topic
    that was probably meant (both engines check the inputs through one function)."""
    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, f"{unique_name}.public.customers", 1)
    typo = f"{unique_name}.public.customer"
    args = run_args(bootstrap, unique_name, [typo], tmp_path / "state", output_topic="o")
    done = run_to_completion([*args, "--available-now"], timeout_s=120)
    assert done.returncode == 2, done.stderr
    assert (
        f"--input-topic {typo}: the topic does not exist "
        f"(did you mean {unique_name}.public.customers?)" in done.stderr
    ), done.stderr
    tail = run_to_completion(["tail", typo, "--bootstrap-servers", bootstrap], timeout_s=60)
    assert tail.returncode == 1, tail.stderr
    assert f"(did you mean {unique_name}.public.customers?)" in tail.stderr

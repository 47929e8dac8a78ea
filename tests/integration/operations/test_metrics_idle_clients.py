"""The metrics port cannot take the engine down from outside: under systemd's default limit of
1,024 descriptors, ~1,000 idle connections to --metrics-port leave the engine processing and
/healthz answering (they once took every descriptor, and RocksDB's next file open failed)."""

from __future__ import annotations

import resource
import time
from pathlib import Path

import psutil
import pytest

from tests.harness.cdc_events import ToastTable
from tests.harness.hydrator_process import App, HydratorProcess
from tests.harness.idle_clients import idle_clients
from tests.harness.topics import produce, read_topic
from tests.integration.operations.test_metrics_endpoint import SERVING, get, wait_for

pytestmark = pytest.mark.integration

DESCRIPTORS = 1024
IDLE_CLIENTS = 985


def test_idle_connections_to_the_metrics_port_do_not_stop_the_engine(
    app: App, tmp_path: Path
) -> None:
    bootstrap, source = app.bootstrap, app.create_source(2)
    output = f"{app.name}.out"
    table = ToastTable(doc_size=3000, seed=7)  # large values: RocksDB opens files
    first = list(table.workload(50, updates_per_key=2))
    produce(bootstrap, source, first)
    local_metrics = ("--metrics-port", "0", "--metrics-host", "127.0.0.1")
    args = app.run_args(*local_metrics, output_topic=output)
    with HydratorProcess(args, tmp_path / "engine.log") as engine:
        port = int(engine.wait_for_log(SERVING, timeout_s=60).group(1))
        pid = engine.process.pid
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (DESCRIPTORS, DESCRIPTORS))
        wait_for(lambda: len(read_topic(bootstrap, output)) >= len(first), "outputs", 120, engine)
        with idle_clients(port, IDLE_CLIENTS):
            time.sleep(2)
            started = time.monotonic()
            assert get(port, "/healthz") == (200, "ok\n")
            assert time.monotonic() - started < 5
            supervisor = psutil.Process(pid)
            assert supervisor.num_threads() < 40
            assert supervisor.num_fds() < DESCRIPTORS - 200
            second = [table.update(key) for key in range(50)]  # placeholder updates
            produce(bootstrap, source, second)
            total = len(first) + len(second)
            wait_for(
                lambda: len(read_topic(bootstrap, output)) >= total, "new outputs", 120, engine
            )
            assert get(port, "/healthz") == (200, "ok\n")
        assert engine.terminate() == 0
    assert "Too many open files" not in engine.log

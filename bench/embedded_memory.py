"""Peak memory (RSS) of the embedded engine on wide rows: does it follow the state cache budget
(`--state-cache-bytes`) or the row size?

N keys with a TOASTed column of B bytes each are inserted, then each is updated once with the
column shipped as the placeholder (so every update needs the key's stored row); `hydrator run
--available-now` processes them as a separate process, whose resident set is sampled every
50 ms. For a baseline, run it with small rows (`--row-bytes 500`).

Run (from the repository root):

    .venv/bin/python bench/embedded_memory.py                          # 30k keys, 19 KB rows
    .venv/bin/python bench/embedded_memory.py --state-cache-bytes 16MB
    .venv/bin/python bench/embedded_memory.py --bootstrap-servers HOST:PORT
    .venv/bin/python bench/embedded_memory.py -- -X consumer.queued.max.messages.kbytes=8192

Arguments after `--` go to `hydrator run` as they are.

Starts a throwaway Tansu broker unless --bootstrap-servers is given. The engine is the package
importable from the current directory (`python -m hydrator.cli`), so running this from another
checkout measures that one.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import orjson
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from hydrator.kafka.local_broker import LocalBroker

PLACEHOLDER = "__debezium_unavailable_value"


def events(keys: int, row_bytes: int, seed: int = 7) -> list[tuple[bytes, bytes]]:
    rng = random.Random(seed)
    docs = ["".join(rng.choices("abcdefghij", k=row_bytes)) for _ in range(16)]
    out = []
    lsn = 0
    for op, doc_of in (("c", lambda k: docs[k % 16]), ("u", lambda k: PLACEHOLDER)):
        for key in range(keys):
            lsn += 1
            value = {
                "before": None,
                "after": {"id": key, "doc": doc_of(key), "n": lsn},
                "source": {"connector": "postgresql", "table": "wide", "lsn": lsn},
                "op": op,
                "ts_ms": 1_700_000_000_000 + lsn,
            }
            out.append((orjson.dumps({"id": key}), orjson.dumps(value)))
    return out


def load(bootstrap: str, topic: str, partitions: int, records: list[tuple[bytes, bytes]]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "partitioner": "murmur2_random",
            "linger.ms": 20,
            "message.max.bytes": 8 * 1024 * 1024,
        }
    )
    for key, value in records:
        while True:
            try:
                producer.produce(topic, value, key)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(120) == 0


def rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except FileNotFoundError:
        pass
    return 0


def run_engine(bootstrap: str, topic: str, extra: list[str]) -> dict:
    app = f"bench-mem-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as state_dir:
        command = [
            sys.executable,
            "-m",
            "hydrator.cli",
            "run",
            "--engine",
            "embedded",
            "--bootstrap-servers",
            bootstrap,
            "--input-topic",
            topic,
            "--output-suffix",
            ".out",
            "--application-id",
            app,
            "--state-dir",
            state_dir,
            "--available-now",
            *extra,
        ]
        began = time.monotonic()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        samples: list[int] = []

        def sample() -> None:
            while process.poll() is None:
                samples.append(rss_kb(process.pid))
                time.sleep(0.05)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, stderr = process.communicate(timeout=3600)
        sampler.join()
        if process.returncode != 0:
            raise SystemExit(f"engine exited {process.returncode}:\n{stderr.decode()[-3000:]}")
        return {
            "wall_s": round(time.monotonic() - began, 1),
            "rss_peak_mb": round(max(samples, default=0) / 1024, 1),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=30_000)
    parser.add_argument("--row-bytes", type=int, default=19_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--bootstrap-servers")
    parser.add_argument("--state-cache-bytes", help="passed to the engine when given")
    args, engine_args = parser.parse_known_args()
    engine_args = [a for a in engine_args if a != "--"]
    broker: AbstractContextManager = (
        nullcontext() if args.bootstrap_servers else LocalBroker().start(timeout_s=60)
    )
    with broker as local:
        bootstrap = args.bootstrap_servers or local.bootstrap_servers
        topic = f"bench-wide-{uuid.uuid4().hex[:8]}"
        load(bootstrap, topic, args.partitions, events(args.keys, args.row_bytes))
        extra = ["--state-cache-bytes", args.state_cache_bytes] if args.state_cache_bytes else []
        extra += engine_args
        result = run_engine(bootstrap, topic, extra)
    print(
        json.dumps(
            {
                "keys": args.keys,
                "row_bytes": args.row_bytes,
                "events": 2 * args.keys,
                "state_cache_bytes": args.state_cache_bytes or "default",
                "engine_args": " ".join(engine_args),
                **result,
            }
        )
    )


if __name__ == "__main__":
    main()

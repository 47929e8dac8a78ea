"""The peer: the same TOAST hydration written as a Quix Streams application would write it, with
the row kept in Quix's RocksDB state (changelog on) — what a team would build instead of this
project.

Per event: peer_rule.py's rule (fill the placeholders of `after` and a null `before` from the
stored row, drop an event at or before the stored position), then store the new row. The output
record is stamped with the time it is produced (`set_timestamp`), as the other runners'
producers do, so the bench can time the output.

Runs in the bench's own virtualenv (Quix Streams pins an older confluent-kafka than the
project), so it imports nothing from the project but peer_rule.py beside it. Started by
`python -m bench`; one instance stops by itself after `--count` outputs. `--instances 2` starts
two instances in one consumer group as child processes and waits for both (the bench times and
samples this process's tree); each of them stops after `--idle-timeout` seconds with nothing to
read, as neither knows its share of the count.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from typing import Any

import peer_rule  # beside this file, which runs as a script
from quixstreams import Application, State
from quixstreams.models import TopicConfig


def hydrate(value: bytes, state: State) -> bytes | None:
    output, stored = peer_rule.hydrate(value, state.get("row"))
    if stored is not None:
        state.set("row", stored)
    return output


def now_ms(*_: Any) -> int:
    return time.time_ns() // 1_000_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--input-topic", required=True)
    parser.add_argument("--output-topic", required=True)
    parser.add_argument("--consumer-group", required=True)
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--guarantee", choices=("at-least-once", "exactly-once"), required=True)
    parser.add_argument("--count", type=int, required=True, help="stop after this many outputs")
    parser.add_argument("--commit-interval", type=float, default=5.0, help="Quix's default")
    parser.add_argument("--loglevel", default="WARNING", help="Quix Streams' (INFO: its steps)")
    parser.add_argument("--instances", type=int, default=1, help="processes in the group")
    parser.add_argument(
        "--compression",
        help="the producer's compression.type for outputs and changelog (default: Quix's, none)",
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=0.0,
        help="stop after this many seconds with nothing to read (0: only by --count)",
    )
    args = parser.parse_args()
    if args.instances > 1:
        raise SystemExit(run_group(args.instances, args.state_dir))

    app = Application(
        broker_address=args.bootstrap_servers,
        consumer_group=args.consumer_group,
        auto_offset_reset="earliest",
        state_dir=args.state_dir,
        processing_guarantee=args.guarantee,
        commit_interval=args.commit_interval,
        loglevel=args.loglevel,
        producer_extra_config=(
            {"compression.type": args.compression} if args.compression else None
        ),
        # Values of ~20 KB (a hydrated event with its before image): librdkafka's default
        # message.max.bytes is 1 MB, enough; the fetch size stays the default too.
    )
    # The bench creates both topics (with retention.ms given: Quix derives its changelog
    # topic's settings from the input's, and Tansu describes only configs given at creation).
    source = app.topic(
        args.input_topic,
        key_deserializer="bytes",
        value_deserializer="bytes",
        config=TopicConfig(num_partitions=1, replication_factor=1),
    )
    sink = app.topic(args.output_topic, key_serializer="bytes", value_serializer="bytes")
    frame = app.dataframe(source)
    frame = frame.apply(hydrate, stateful=True).filter(lambda value: value is not None)
    frame = frame.set_timestamp(now_ms)
    frame.to_topic(sink)
    if args.idle_timeout > 0:
        app.run(timeout=args.idle_timeout, collect=False)
    else:
        app.run(count=args.count, collect=False)


GROUP_IDLE_TIMEOUT_S = 3.0  # long enough for a join under load; both backlogs pay it alike


def run_group(instances: int, state_dir: str) -> int:
    """`instances` copies of this application in one consumer group, each with a state
    directory of its own; the first non-zero exit code of theirs, else 0."""
    argv = sys.argv[1:]
    at = argv.index("--instances")
    base = argv[:at] + argv[at + 2 :]
    children = []
    for n in range(instances):
        own = [*base, "--idle-timeout", str(GROUP_IDLE_TIMEOUT_S)]
        own[own.index("--state-dir") + 1] = f"{state_dir}/instance-{n}"
        children.append(subprocess.Popen([sys.executable, __file__, *own]))
    codes = [child.wait() for child in children]
    return next((code for code in codes if code), 0)


if __name__ == "__main__":
    main()

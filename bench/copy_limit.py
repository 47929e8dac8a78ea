"""The limit: a confluent-kafka consume -> produce copy of the input topic, with no state, no
parsing and no transactions. No Python stream processor on these clients can beat it.

    python -m bench.copy_limit --bootstrap-servers HOST:PORT --input-topic IN --output-topic OUT

Reads every partition from the start to the end it had when the copy started, writes each
record (key, value, headers) to the same partition of the output, and exits.
"""

from __future__ import annotations

import argparse

from confluent_kafka import Consumer, KafkaException, Producer

from hydrator.kafka import consumed
from hydrator.kafka.offsets import from_the_start, topic_ends


def copy(bootstrap: str, source: str, sink: str) -> int:
    ends = topic_ends({"bootstrap.servers": bootstrap, "group.id": "bench-copy-probe"}, source)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-copy",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.message.max.bytes": 16 * 1024 * 1024,
        }
    )
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "message.max.bytes": 16 * 1024 * 1024}
    )
    remaining = {p for p, end in ends.items() if end > 0}
    consumer.assign(from_the_start(source, remaining))
    copied = 0
    try:
        while remaining:
            for msg in consumer.consume(1000, 0.5):
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                partition = consumed.partition(msg)
                while True:
                    try:
                        producer.produce(
                            sink, msg.value(), msg.key(), partition, headers=msg.headers()
                        )
                        break
                    except BufferError:
                        producer.poll(0.05)
                copied += 1
                if consumed.offset(msg) + 1 >= ends[partition]:
                    remaining.discard(partition)
            producer.poll(0)
        if producer.flush(120):
            raise RuntimeError("the copy's producer could not deliver everything in 120 s")
    finally:
        consumer.close()
    return copied


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--input-topic", required=True)
    parser.add_argument("--output-topic", required=True)
    args = parser.parse_args()
    copy(args.bootstrap_servers, args.input_topic, args.output_topic)


if __name__ == "__main__":
    main()

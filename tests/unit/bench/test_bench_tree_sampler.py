"""The bench's process-tree sampler (bench/measure.py) tells a runner's librdkafka threads apart:
their CPU is the `of which librdkafka threads` column."""

from __future__ import annotations

import subprocess
import sys
import time

from bench.measure import TreeSampler

# A child with a Kafka client: librdkafka starts its rdk:* threads without any broker.
CHILD = """
import time
from confluent_kafka import Producer
producer = Producer({"bootstrap.servers": "127.0.0.1:9"})
print("ready", flush=True)
end = time.monotonic() + 1.5
while time.monotonic() < end:
    producer.poll(0.01)
"""


def test_the_sampler_counts_a_childs_librdkafka_threads_apart() -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        sampler = TreeSampler(child.pid).start()
        time.sleep(0.6)
        samples = sampler.stop()
    finally:
        child.kill()
        child.wait()
    assert sampler.client_threads_seen >= 2  # rdk:main, rdk:broker..., rdk:bg
    assert len(samples.client_cpu_s) == len(samples.cpu_s) > 0
    assert samples.client_cpu_s[-1] >= 0

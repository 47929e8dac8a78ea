"""A three-node Apache Kafka cluster on loopback (every node a broker and a KRaft controller,
every topic replicated three times), for a test that kills one node as production loses one:
the cluster goes on with the other two, and the node comes back on its ports and data."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path

from confluent_kafka.admin import AdminClient

from hydrator.kafka.apache_kafka import ApacheKafka, cluster_id
from hydrator.kafka.local_broker import free_port

NODES = 3
REPLICATED = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "share.coordinator.state.topic.replication.factor": "3",
    "group.min.session.timeout.ms": "500",
}


@contextmanager
def kafka_cluster(home: Path, work_dir: Path) -> Iterator[list[ApacheKafka]]:
    controllers = [free_port() for _ in range(NODES)]
    voters = ",".join(f"{i + 1}@127.0.0.1:{port}" for i, port in enumerate(controllers))
    shared = cluster_id()
    nodes = [
        ApacheKafka(
            home,
            controller_port=controllers[i],
            work_dir=work_dir / f"node-{i + 1}",
            settings=REPLICATED,
            node_id=i + 1,
            cluster=shared,
            voters=voters,
        )
        for i in range(NODES)
    ]
    with ExitStack() as stack:
        for node in nodes:
            stack.callback(node.close)
            node.start(wait=False)  # a node answers once a quorum of them runs
        with ThreadPoolExecutor(NODES) as pool:
            list(pool.map(lambda node: node.wait_ready(), nodes))
        yield nodes


def bootstrap_of(nodes: list[ApacheKafka]) -> str:
    return ",".join(node.bootstrap_servers for node in nodes)


def coordinator_of(nodes: list[ApacheKafka], internal_topic: str, key: str) -> ApacheKafka:
    """The node leading the partition of `internal_topic` (`__transaction_state`,
    `__consumer_offsets`) that `key` (a transactional id, a group id) hashes to, as Kafka places
    it: abs(Java's String.hashCode) % partitions."""
    admin = AdminClient({"bootstrap.servers": bootstrap_of(nodes)})
    partitions = admin.list_topics(timeout=30).topics[internal_topic].partitions
    leader = partitions[_java_hash(key) % len(partitions)].leader
    return next(node for node in nodes if node.node_id == leader)


def _java_hash(text: str) -> int:
    """Java's String.hashCode over the UTF-16 code units, made non-negative as Kafka does."""
    units = text.encode("utf-16-be")
    value = 0
    for i in range(0, len(units), 2):
        value = (31 * value + int.from_bytes(units[i : i + 2], "big")) & 0xFFFFFFFF
    return value & 0x7FFFFFFF

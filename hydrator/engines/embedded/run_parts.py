"""The parts of one run of the engine that its coordinators share: the loop (loop.py), the open
batch and its commit (batch.py, commit.py) and the rebalances (rebalances.py). The engine builds
them once for each start (engine.py) and hands them on as one."""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import Consumer

from hydrator.engines.embedded.assignment import Assignment
from hydrator.engines.embedded.counts import RunCounts
from hydrator.engines.embedded.metrics import EmbeddedMetrics
from hydrator.engines.embedded.transaction import TransactionalWriter
from hydrator.topology.layout import Topology


@dataclass(frozen=True)
class RunParts:
    """`consumer`: the group member reading the inputs and the handoff topic; `writer`: the
    transactional producer of everything the batch writes; `assignment`: the tasks this process
    owns; `counts`: the batch's and the run's counts."""

    consumer: Consumer
    writer: TransactionalWriter
    assignment: Assignment
    topology: Topology
    counts: RunCounts
    metrics: EmbeddedMetrics

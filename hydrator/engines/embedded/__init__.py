"""The embedded engine: a Kafka-Streams-style runner, in one process or in worker processes.

workers.py        --workers N: the supervisor, and what its worker processes share
engine.py         wiring: clients, state directory, loop; in-process restart after an outage;
                  clean shutdown on SIGINT/SIGTERM
watchdog.py       deadlines on blocking Kafka calls; stop requests that reach a blocked thread
topics.py         check inputs, create outputs and internal topics (the layout itself, and the
                  records a task writes, are both engines': hydrator/topology/)
loop.py           poll -> task -> timers -> commit when due: coordinates the four below
run_parts.py      the run's parts the loop's coordinators share (consumer, writer, tasks, ...)
batch.py          the open batch: what it holds, when it is due (commit and backlog intervals)
commit.py         committing the open batch in one transaction, or dropping it
rebalances.py     partitions assigned, revoked or lost; a failed local store redone
reselect_step.py  --reselect: a batch's unfillable placeholders read from the source
assignment.py     the tasks owned now, opened (restored) and closed on rebalance
task.py           one partition's processor: core calls, state cache, timers
local_handoffs.py key-change handoffs between this process's tasks, applied in the same batch
clock.py          a task's processing clock (downtime not counted) and its catch-up gate
timers.py         per-task deadline index for Hydrator.tick
transaction.py    one Kafka transaction per batch: outputs, handoffs, DLQ, changelog, offsets
sized_sink.py     every record measured against its topic's limit before it is produced
restore.py        bring a task's RocksDB store up to its changelog partition
changelog.py      which changelog records a dead transaction left (Tansu shows them)
state_dir.py      the local state directory: lock, process id, store paths
available_now.py  when `--available-now` may stop
dlq_replay.py     the dead-letter topic as a replay's input
progress.py       the periodic progress line
"""

from hydrator.engines.embedded.engine import EmbeddedEngine

__all__ = ["EmbeddedEngine"]

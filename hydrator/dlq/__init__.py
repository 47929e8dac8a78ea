"""An application's dead letters read back, for `hydrator dlq replay` (docs/operations.md).

letters.py    a dead letter as the record it holds (topic, partition, offset from
              `hydrator.source`; key, value and headers as they came), its reason and the kind
              of that reason; the dead letters no replay can take, and why
selection.py  which dead letters a replay takes (source topic, error kind, time, source offsets)
topic.py      the dead-letter topic of an application, and where a replay stands in it: the
              group's committed offset, and the end an unfinished replay works to
command.py    the `hydrator dlq replay` command line for a run's configuration
dry_run.py    `--dry-run`: what a replay would take, counted, nothing written

The replay itself is the embedded engine reading the dead-letter topic in place of its inputs
(hydrator/engines/embedded/dlq_replay.py): the same rules, state and transactions as a run.
"""

"""Seeded images: what `hydrator state bootstrap` writes into state and both engines read back
(docs/cold-start.md). The state records a bootstrap makes and how they meet the state already
there (images.py), the snapshot each table was bootstrapped in (snapshots.py), and the topic the
Spark engine's seeded states travel in (bootstrap_topic.py). Below the engines and the command:
each engine and `hydrator/bootstrap/` (the command's readers and writers) import from here."""

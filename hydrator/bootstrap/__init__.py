"""`hydrator state bootstrap` (docs/cold-start.md): readers of full rows (postgres.py with
hydrator/postgres/debezium_values.py, a topic in run.py), and where each engine keeps the state
records they become (embedded.py, spark.py). What the engines share with it (the records, how
they merge, the snapshots topic) is in hydrator/seeding/."""

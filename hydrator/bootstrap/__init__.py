"""`hydrator state bootstrap` (docs/cold-start.md): readers of full rows (postgres.py with
hydrator/postgres/debezium_values.py, a topic in run.py), the state records they become
(images.py), and where each engine keeps them (embedded.py, spark.py)."""

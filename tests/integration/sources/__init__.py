"""Each source end to end: Debezium (JSON, Avro, flattened), Cassandra, CockroachDB, YDB."""

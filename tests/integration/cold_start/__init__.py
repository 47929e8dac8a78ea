"""Cold start end to end: state bootstrap and re-select against real Postgres and Debezium."""

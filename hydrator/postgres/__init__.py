"""Postgres values exactly as Debezium's JSON converter ships them: what both the re-select
client (hydrator/reselect/) and the state bootstrap (hydrator/bootstrap/) read from a Postgres
source becomes what the connector would have sent."""

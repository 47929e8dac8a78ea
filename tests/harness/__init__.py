"""Real-component test harness: broker, Postgres, Debezium bridge, the FULL-identity oracle."""

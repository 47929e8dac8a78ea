"""Real-component test harness: Kafka broker, Postgres, Debezium bridge, the FULL-identity oracle."""

"""Unit tests of hydrator/engines/spark and hydrator/spark_app: steps, clock, timeouts, sink."""

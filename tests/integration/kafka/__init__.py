"""Kafka clients and brokers themselves: the local broker, rebalance callbacks, Tansu."""

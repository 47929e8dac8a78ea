"""Kafka plumbing shared by the engines, the demo and the tests."""

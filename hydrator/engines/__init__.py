"""The engines that drive the pure core: `embedded` (Kafka-Streams-style, one process per
instance) and `spark` (Structured Streaming)."""

"""What operators run beside `run`: dlq replay, state tools, demo, dev, build, metrics, logs."""

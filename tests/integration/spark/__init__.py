"""The Spark engine end to end against the real broker."""

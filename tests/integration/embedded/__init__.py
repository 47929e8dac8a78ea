"""The embedded engine end to end against the real broker."""

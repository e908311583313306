"""Partition logs on disk: segments, offset and time indexes, recovery, retention, producer state."""

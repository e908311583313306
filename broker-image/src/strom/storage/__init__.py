"""Partition logs on disk.

Segments, offset and time indexes, recovery, retention, producer state (``partition_log``
is the entry point; ``log_manager`` holds all partitions of a broker).
"""

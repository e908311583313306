"""Replication between leaders and followers (single-node brokers need none yet)."""

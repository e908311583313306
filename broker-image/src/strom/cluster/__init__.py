"""Cluster metadata: topics, partitions and their configs, and the image brokers serve from."""

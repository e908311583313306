"""Cluster metadata: topics, partitions and their configs, and the image every broker serves from."""

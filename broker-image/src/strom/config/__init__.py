"""Broker and topic configuration: Kafka property names, defaults, validation, sources."""

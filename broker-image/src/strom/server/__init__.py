"""The asyncio Kafka listener, request handlers, and the HTTP side (metrics and probes)."""

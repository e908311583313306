"""Strom: a streaming platform that speaks the Apache Kafka wire protocol."""

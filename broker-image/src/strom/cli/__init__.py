"""Command-line entry points: strom-server and the kafka-*.sh style tools."""

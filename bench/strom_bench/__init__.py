"""Strom's benchmarks side by side with Apache Kafka: start each broker, drive it with Kafka's
own load generators, and report medians and Strom/Kafka ratios (see bench/README.md)."""

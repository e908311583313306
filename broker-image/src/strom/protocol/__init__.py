"""Sans-I/O Kafka wire protocol: framing, headers, the supported API table, kio codecs."""

"""Request handlers, one module per API family. Each takes the broker, the decoded
request and its context, and returns a kio response object (or None for acks=0)."""

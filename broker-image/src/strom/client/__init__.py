"""A Kafka client for everything that talks to Strom from outside: the command-line tools,
the operator and the tests.

Built on confluent-kafka (librdkafka), never on the broker's own packages: `settings`
turns Kafka's Java-style client properties into librdkafka ones, `admin` wraps the admin
API (topics, configs, consumer groups, offsets) in plain data, `errors` names failures
the way a user needs to read them.
"""

"""A Kafka client for everything that talks to Strom from outside: the command-line tools,
the operator and the tests.

Built on confluent-kafka (librdkafka), never on the broker's own packages, and shipped
as an extra (`pip install 'strom[client]'`) so the broker image carries no librdkafka:
`settings` turns Kafka's Java-style client properties into librdkafka ones, `admin` wraps
the admin API in plain data (`Admin` blocking, `AsyncAdmin` for asyncio) returned as
`results`; its operations are written once, as generators of `steps`, in `topics`,
`groups` and `cluster`; `wire` sends the few admin requests librdkafka lacks as plain
Kafka requests (kio message classes), `errors` names failures the way a user needs to
read them.
"""

try:
    import confluent_kafka  # noqa: F401
except ModuleNotFoundError as missing:
    if missing.name != "confluent_kafka":
        raise
    raise ModuleNotFoundError(
        "strom.client needs confluent-kafka, which is not installed: pip install 'strom[client]'",
        name="confluent_kafka",
    ) from None

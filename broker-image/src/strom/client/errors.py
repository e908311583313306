"""Client failures as exceptions whose message a user can act on."""

from __future__ import annotations

import confluent_kafka


class ClientError(Exception):
    """An operation failed; str(error) says what and why, in Kafka's words where possible."""


class ConnectError(ClientError):
    """No bootstrap server could be reached (refused, unresolvable, timed out)."""


class NotFoundError(ClientError):
    """A topic, partition or group that the operation needs does not exist."""


class AlreadyExistsError(ClientError):
    """Creating something that is already there (a topic)."""


class UnsupportedError(ClientError):
    """The broker does not serve a request the operation needs (or not at our version)."""


class ConfigurationError(ClientError):
    """A client property that the client library refuses or cannot express."""


def kafka_error(exception: BaseException) -> confluent_kafka.KafkaError | None:
    """The KafkaError inside a confluent-kafka exception, if there is one."""
    if isinstance(exception, confluent_kafka.KafkaException) and exception.args:
        inner = exception.args[0]
        if isinstance(inner, confluent_kafka.KafkaError):
            return inner
    return None


def describe(error: confluent_kafka.KafkaError) -> str:
    """A KafkaError as one line: the broker's message when it sent one, without the
    library's "Broker: " prefix."""
    text = error.str() or error.name()
    return text.removeprefix("Broker: ")

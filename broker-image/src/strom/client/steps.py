"""How an admin operation waits, one step at a time, and the session it runs against.

Every operation (`topics`, `groups`, `cluster`) is written once, as a generator that
yields what it waits for (a `Future` of confluent-kafka, or a `Request` that strom.client
sends itself through `wire`) and receives the result, or has the ClientError thrown in.
`admin.Admin` runs it blocking, `admin.AsyncAdmin` on the event loop; neither repeats an
operation's logic. A `Session` is what operations are given: the confluent-kafka
AdminClient with the deadline of every wait and the bootstrap servers' reachability
(connection.Watch). `translate` turns confluent-kafka's failures into ClientErrors.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Generator, Mapping
from typing import Any, NamedTuple, TypeVar

import confluent_kafka
from confluent_kafka import admin as kafka_admin

from strom.client import connection, errors, settings

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 30.0


class Future(NamedTuple):
    future: concurrent.futures.Future[Any]
    what: str
    subject: str | None = None


class Request(NamedTuple):
    addresses: tuple[tuple[str, int], ...]
    request: Any  # a kio request object
    response_type: type[Any]
    what: str


Step = Future | Request
Operation = Generator[Step, Any, T]


class Session:
    """The connection (confluent-kafka AdminClient) that every operation is given."""

    def __init__(
        self,
        bootstrap: str | None,
        properties: Mapping[str, str] | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        config: dict[str, Any] = dict(settings.librdkafka_settings(bootstrap, properties or {}))
        self.bootstrap = str(config["bootstrap.servers"])
        self.timeout = timeout
        self.security_protocol = str(config.get("security.protocol", "plaintext"))
        self.watch = connection.Watch(self.bootstrap)
        config["error_cb"] = self.watch
        config["logger"] = settings.quiet_logger()
        try:
            self.client = kafka_admin.AdminClient(config)
        except confluent_kafka.KafkaException as e:
            raise errors.ConfigurationError(_library_message(e)) from None
        except (ValueError, TypeError) as e:
            raise errors.ConfigurationError(str(e)) from None


def translate(exception: confluent_kafka.KafkaException, subject: str | None) -> errors.ClientError:
    """A confluent-kafka exception as a ClientError naming `subject` (a topic or group)."""
    error = errors.kafka_error(exception)
    if error is None:
        return errors.ClientError(str(exception))
    code = error.code()
    if code in (
        confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART,
        confluent_kafka.KafkaError._UNKNOWN_TOPIC,
    ):
        return errors.NotFoundError(
            f"Topic '{subject}' does not exist" if subject else errors.describe(error)
        )
    if code == confluent_kafka.KafkaError.GROUP_ID_NOT_FOUND:
        return errors.NotFoundError(errors.describe(error))
    if code == confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS:
        return errors.AlreadyExistsError(
            f"Topic '{subject}' already exists." if subject else errors.describe(error)
        )
    if code in (
        confluent_kafka.KafkaError._UNSUPPORTED_FEATURE,
        confluent_kafka.KafkaError.UNSUPPORTED_VERSION,
    ):
        return errors.UnsupportedError(errors.describe(error))
    if code in (confluent_kafka.KafkaError._TRANSPORT, confluent_kafka.KafkaError._TIMED_OUT):
        return errors.ClientError(f"{errors.describe(error)} (is the broker reachable?)")
    return errors.ClientError(errors.describe(error))


def _library_message(exception: confluent_kafka.KafkaException) -> str:
    error = errors.kafka_error(exception)
    return errors.describe(error) if error is not None else str(exception)

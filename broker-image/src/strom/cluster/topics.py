"""Topic names and the refusals of metadata changes, as Kafka words them.

The controller raises these; handlers map each to its Kafka error code and pass the
message to the client.
"""

from __future__ import annotations

import re

_LEGAL_TOPIC_CHARS = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME_LENGTH = 249
OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTIONS_TOPIC = "__transaction_state"
# Written only by the broker's own coordinators; clients may not produce to or delete them.
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTIONS_TOPIC})
# Names no topic may take: the metadata log's own partition.
RESERVED_TOPICS = frozenset({"__cluster_metadata"})


class MetadataError(Exception):
    """Base for refusals of a metadata change; the message is shown to the client."""


class InvalidTopicError(MetadataError):
    pass


class TopicExistsError(MetadataError):
    pass


class UnknownTopicError(MetadataError):
    pass


class InvalidPartitionsError(MetadataError):
    pass


class InvalidReplicationFactorError(MetadataError):
    pass


class PolicyViolationError(MetadataError):
    """A request over a documented limit (Kafka's POLICY_VIOLATION)."""


class StorageFailedError(MetadataError):
    """The change could not be made durable, or its logs could not be created: nothing of
    it stays behind and the client may retry (Kafka's KAFKA_STORAGE_ERROR)."""


class NotControllerError(MetadataError):
    """This node cannot change metadata now (no quorum): retriable."""


class CommitTimeoutError(MetadataError):
    """The change was written but no majority of the quorum committed it in time: it may
    still take effect (Kafka's REQUEST_TIMED_OUT; retriable)."""


def validate_topic_name(name: str) -> None:
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError('Topic name cannot be "." or ".."')
    if name in RESERVED_TOPICS:
        raise InvalidTopicError(f"Topic name {name} is reserved for the cluster metadata")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters"
        )
    if not _LEGAL_TOPIC_CHARS.match(name):
        raise InvalidTopicError(
            f"Topic name {name!r} is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'"
        )


def collision_key(name: str) -> str:
    # Kafka refuses topics that differ only by '.' versus '_': metric names collide.
    return name.replace(".", "_")

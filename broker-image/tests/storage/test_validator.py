"""The log validator: what a produced record set must satisfy, and the typed reason when
it does not (the handler maps each reason to Kafka's error code)."""

from __future__ import annotations

import pytest
from strom.records import batches, compression, control
from strom.storage import validator

NOW = 1_700_000_000_000
PLAIN = validator.Rules(max_message_bytes=1_000_000, compacted=False, compression_type="producer")


def batch(*values: bytes, key: bytes | None = b"k") -> bytes:
    return batches.build_batch([(key, value, [], NOW) for value in values])


def test_a_valid_batch_is_returned_as_the_same_bytes() -> None:
    data = bytearray(batch(b"a", b"b"))
    checked, headers = validator.validate(data, PLAIN, transactional=False, where="t-0")
    assert checked is data and len(headers) == 1 and headers[0].records_count == 2


@pytest.mark.parametrize(
    ("data", "rules", "transactional", "reason"),
    [
        (bytearray(batch(b"a"))[:-3], PLAIN, False, validator.Reason.CORRUPT),
        (
            bytearray(batch(b"x" * 5000)),
            validator.Rules(4000, False, "producer"),
            False,
            validator.Reason.TOO_LARGE,
        ),
        (
            bytearray(batch(b"a", key=None)),
            validator.Rules(1_000_000, True, "producer"),
            False,
            validator.Reason.INVALID_RECORD,
        ),
        (bytearray(batch(b"a") + batch(b"b")), PLAIN, False, validator.Reason.INVALID_RECORD),
        (
            bytearray(
                batches.build_batch(
                    [(b"k", b"a", [], 0)],
                    producer_id=7,
                    producer_epoch=0,
                    base_sequence=0,
                    is_transactional=True,
                )
            ),
            PLAIN,
            False,
            validator.Reason.TRANSACTIONAL_ID_REQUIRED,
        ),
        (
            bytearray(
                control.build_end_txn_marker(
                    producer_id=7,
                    producer_epoch=0,
                    commit=True,
                    coordinator_epoch=0,
                    timestamp_ms=0,
                )
            ),
            PLAIN,
            True,
            validator.Reason.INVALID_RECORD,
        ),
        (
            bytearray(batches.build_batch([(b"k", b"a", [], 0)], producer_id=7, producer_epoch=0)),
            PLAIN,
            False,
            validator.Reason.INVALID_RECORD,
        ),
    ],
    ids=[
        "truncated",
        "too-large",
        "compacted-keyless",
        "two-batches",
        "transactional-without-id",
        "control-batch",
        "producer-id-without-sequence",
    ],
)
def test_refusals_carry_their_reason(
    data: bytearray, rules: validator.Rules, transactional: bool, reason: validator.Reason
) -> None:
    with pytest.raises(validator.InvalidBatch) as refused:
        validator.validate(data, rules, transactional=transactional, where="t-0")
    assert refused.value.reason is reason


def test_a_keyless_record_names_the_partition() -> None:
    with pytest.raises(validator.InvalidBatch, match="topic partition orders-3"):
        validator.validate(
            bytearray(batch(b"a", key=None)),
            validator.Rules(1_000_000, True, "producer"),
            transactional=False,
            where="orders-3",
        )


@pytest.mark.parametrize("codec_name", ["gzip", "snappy", "lz4", "zstd"])
def test_a_topic_codec_rewrites_the_batch_keeping_its_records(codec_name: str) -> None:
    rules = validator.Rules(1_000_000, False, codec_name)
    checked, (header,) = validator.validate(
        bytearray(batch(b"a" * 300, b"b")), rules, transactional=False, where="t-0"
    )
    assert header.compression == validator.TOPIC_CODECS[codec_name] != compression.NONE
    assert [r.value for r in batches.iter_records(checked)] == [b"a" * 300, b"b"]

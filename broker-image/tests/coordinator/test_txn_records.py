"""The records of __transaction_state: TransactionLogKey v0 and TransactionLogValue v0/v1
against bytes derived by hand from Kafka's JSON schemas, and against bytes Kafka 4.3.1's
own classes wrote."""

from __future__ import annotations

import pytest
from strom.coordinator import offsets_records
from strom.coordinator.txn_records import (
    TOPIC,
    RecordFormatError,
    TransactionLogValue,
    encode_key,
    encode_value,
    parse_key,
    parse_value,
    partition_for,
)
from strom.coordinator.txn_states import TransactionState

# Golden bytes printed by a throwaway Java program run with
# `java -cp 'e2e/peers/lib/*' Golden.java` (Kafka 4.3.1's jars): TransactionLog.keyToBytes,
# TransactionLog.valueToBytes(new TxnTransitMetadata(...), TV_0 or TV_2) for the single
# topic cases, and MessageUtil.toVersionPrefixedBytes(version, new TransactionLogValue()
# ...) for the two-topic ones (valueToBytes groups topics in HashMap order).
JAVA_KEY_MY_TXN = "000000066d792d74786e"
# producer 1000, epoch 5, timeout 60000, Ongoing, orders-0 and orders-2, start
# 1700000000000, last update 1700000001000
JAVA_ONGOING_V0 = (
    "000000000000000003e800050000ea60010000000100066f7264657273000000020000000000000002"
    "0000018bcfe56be80000018bcfe56800"
)
# Empty, epoch 0, start -1: a null partition list
JAVA_EMPTY_V0 = "000000000000000003e800000000ea6000ffffffff0000018bcfe56be8ffffffffffffffff"
JAVA_EMPTY_V1 = "000100000000000003e800000000ea6000000000018bcfe56be8ffffffffffffffff00"
# TV2 PrepareCommit: previous 999, next 2000, epoch 6, client transaction version 2
JAVA_PREPARE_COMMIT_V1 = (
    "000100000000000003e800060000ea600202076f726465727303000000000000000200000001"
    "8bcfe56fd00000018bcfe5680003000800000000000003e7010800000000000007d002020002"
)
# TV2 CompleteCommit: previous 1000 (itself), no partitions, at 1700000003000
JAVA_COMPLETE_COMMIT_V1 = (
    "000100000000000003e800060000ea6004010000018bcfe573b80000018bcfe5680002000800000000"
    "000003e802020002"
)
# producer 7, epoch 1, timeout 30000, PrepareAbort, a-0, a-1, b-4, last update 20, start 10
JAVA_TWO_TOPICS_V0 = (
    "00000000000000000007000100007530030000000200016100000002000000000000000100016200"
    "000001000000040000000000000014000000000000000a"
)
JAVA_TWO_TOPICS_V1 = (
    "00010000000000000007000100007530030302610300000000000000010002620200000004000000"
    "000000000014000000000000000a00"
)
# the same with previous producer id 6, client transaction version 2 and Kafka 4.3's
# NextProducerEpoch (tag 3) = 3
JAVA_NEXT_EPOCH_V1 = (
    "00010000000000000007000100007530030302610300000000000000010002620200000004000000"
    "000000000014000000000000000a03000800000000000000060202000203020003"
)

ORDERS = frozenset({("orders", 0), ("orders", 2)})
TWO_TOPICS = frozenset({("a", 0), ("a", 1), ("b", 4)})


def value(**changes: object) -> TransactionLogValue:
    fields: dict[str, object] = {
        "producer_id": 1000,
        "producer_epoch": 5,
        "timeout_ms": 60000,
        "state": TransactionState.ONGOING,
        "partitions": ORDERS,
        "last_update_ms": 1700000001000,
        "start_ms": 1700000000000,
    }
    fields.update(changes)
    return TransactionLogValue(**fields)  # type: ignore[arg-type]


def test_the_topic_name_is_kafkas() -> None:
    assert TOPIC == "__transaction_state"


def test_key_bytes_by_hand() -> None:
    # int16 version 0, then TransactionalId: int16 length + UTF-8
    assert encode_key("t") == bytes.fromhex("0000" + "0001" + "74")
    assert encode_key("ü") == bytes.fromhex("0000" + "0002" + "c3bc")


def test_key_bytes_match_kafkas() -> None:
    assert encode_key("my-txn").hex() == JAVA_KEY_MY_TXN
    assert parse_key(bytes.fromhex(JAVA_KEY_MY_TXN)) == "my-txn"


def test_key_round_trip() -> None:
    for transactional_id in ("", "a", "x" * 300, "ünïcode-ид"):
        assert parse_key(encode_key(transactional_id)) == transactional_id


def test_value_v0_bytes_by_hand() -> None:
    expected = (
        "0000"  # version 0
        "0000000000000007"  # ProducerId
        "0001"  # ProducerEpoch
        "00007530"  # TransactionTimeoutMs 30000
        "03"  # TransactionStatus PrepareAbort
        "00000002"  # TransactionPartitions: 2 topics, sorted
        "0001" + "61" + "00000002" + "00000000" + "00000001"  # a: [0, 1]
        "0001" + "62" + "00000001" + "00000004"  # b: [4]
        "0000000000000014"  # TransactionLastUpdateTimestampMs 20
        "000000000000000a"  # TransactionStartTimestampMs 10
    )
    encoded = encode_value(
        value(
            producer_id=7,
            producer_epoch=1,
            timeout_ms=30000,
            state=TransactionState.PREPARE_ABORT,
            partitions=TWO_TOPICS,
            last_update_ms=20,
            start_ms=10,
        )
    )
    assert encoded.hex() == expected


def test_value_v1_bytes_by_hand() -> None:
    expected = (
        "0001"  # version 1 (flexible)
        "0000000000000007" + "0001" + "00007530" + "03"
        "03"  # compact array: 2 topics + 1
        "02" + "61" + "03" + "00000000" + "00000001" + "00"  # a: compact string, [0, 1], no tags
        "02" + "62" + "02" + "00000004" + "00"  # b: [4]
        "0000000000000014" + "000000000000000a"
        "02"  # two tagged fields, in tag order, each: tag, size, value
        "00" + "08" + "0000000000000006"  # PreviousProducerId = 6
        "02" + "02" + "0002"  # ClientTransactionVersion = 2; NextProducerId is the default
    )
    encoded = encode_value(
        value(
            producer_id=7,
            producer_epoch=1,
            timeout_ms=30000,
            state=TransactionState.PREPARE_ABORT,
            partitions=TWO_TOPICS,
            last_update_ms=20,
            start_ms=10,
            previous_producer_id=6,
            client_transaction_version=2,
        ),
        version=1,
    )
    assert encoded.hex() == expected


def test_empty_writes_a_null_partition_list() -> None:
    empty = value(state=TransactionState.EMPTY, partitions=frozenset(), producer_epoch=0)
    # v0: int32 -1; v1: compact length 0
    assert encode_value(empty)[17:21] == b"\xff\xff\xff\xff"
    assert encode_value(empty, version=1)[17:18] == b"\x00"


def test_an_empty_list_is_not_null_outside_empty() -> None:
    complete = value(state=TransactionState.COMPLETE_ABORT, partitions=frozenset())
    assert encode_value(complete)[17:21] == b"\x00\x00\x00\x00"
    assert encode_value(complete, version=1)[17:18] == b"\x01"


def test_empty_with_partitions_is_refused() -> None:
    with pytest.raises(ValueError):
        encode_value(value(state=TransactionState.EMPTY))


def test_v0_drops_the_tagged_fields() -> None:
    linked = value(previous_producer_id=3, next_producer_id=4, client_transaction_version=2)
    assert encode_value(linked) == encode_value(value())
    assert parse_value(encode_value(linked)) == value()


@pytest.mark.parametrize(
    ("hex_bytes", "expected", "version"),
    [
        (JAVA_ONGOING_V0, value(), 0),
        (
            JAVA_EMPTY_V0,
            value(
                producer_epoch=0, state=TransactionState.EMPTY, partitions=frozenset(), start_ms=-1
            ),
            0,
        ),
        (
            JAVA_EMPTY_V1,
            value(
                producer_epoch=0, state=TransactionState.EMPTY, partitions=frozenset(), start_ms=-1
            ),
            1,
        ),
        (
            JAVA_PREPARE_COMMIT_V1,
            value(
                producer_epoch=6,
                state=TransactionState.PREPARE_COMMIT,
                last_update_ms=1700000002000,
                previous_producer_id=999,
                next_producer_id=2000,
                client_transaction_version=2,
            ),
            1,
        ),
        (
            JAVA_COMPLETE_COMMIT_V1,
            value(
                producer_epoch=6,
                state=TransactionState.COMPLETE_COMMIT,
                partitions=frozenset(),
                last_update_ms=1700000003000,
                previous_producer_id=1000,
                client_transaction_version=2,
            ),
            1,
        ),
        (
            JAVA_TWO_TOPICS_V0,
            value(
                producer_id=7,
                producer_epoch=1,
                timeout_ms=30000,
                state=TransactionState.PREPARE_ABORT,
                partitions=TWO_TOPICS,
                last_update_ms=20,
                start_ms=10,
            ),
            0,
        ),
        (
            JAVA_TWO_TOPICS_V1,
            value(
                producer_id=7,
                producer_epoch=1,
                timeout_ms=30000,
                state=TransactionState.PREPARE_ABORT,
                partitions=TWO_TOPICS,
                last_update_ms=20,
                start_ms=10,
            ),
            1,
        ),
        (
            JAVA_NEXT_EPOCH_V1,
            value(
                producer_id=7,
                producer_epoch=1,
                timeout_ms=30000,
                state=TransactionState.PREPARE_ABORT,
                partitions=TWO_TOPICS,
                last_update_ms=20,
                start_ms=10,
                previous_producer_id=6,
                client_transaction_version=2,
                next_producer_epoch=3,
            ),
            1,
        ),
    ],
)
def test_value_bytes_match_kafkas(
    hex_bytes: str, expected: TransactionLogValue, version: int
) -> None:
    assert parse_value(bytes.fromhex(hex_bytes)) == expected
    assert encode_value(expected, version).hex() == hex_bytes


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("state", list(TransactionState))
def test_value_round_trip_in_every_state(version: int, state: TransactionState) -> None:
    partitions = frozenset() if state is TransactionState.EMPTY else TWO_TOPICS
    original = value(state=state, partitions=partitions)
    if version == 1:
        original = value(
            state=state,
            partitions=partitions,
            previous_producer_id=2**40,
            next_producer_id=12,
            client_transaction_version=2,
        )
    assert parse_value(encode_value(original, version)) == original


def test_value_round_trip_at_the_limits() -> None:
    limits = value(
        producer_id=2**63 - 1,
        producer_epoch=32767,
        timeout_ms=2**31 - 1,
        partitions=frozenset({("t" * 200, 2**31 - 1), ("t" * 200, 0)}),
        last_update_ms=-1,
        start_ms=2**62,
        previous_producer_id=-(2**63),
    )
    assert parse_value(encode_value(limits, 1)) == limits


def test_many_partitions_need_a_multi_byte_varint() -> None:
    many = value(partitions=frozenset(("topic", p) for p in range(300)))
    encoded = encode_value(many, 1)
    # compact array of 300 ids: unsigned varint 301 = ad 02
    assert bytes.fromhex("ad02") in encoded
    assert parse_value(encoded) == many


def test_a_null_value_is_a_tombstone() -> None:
    assert parse_value(None) is None


def test_unknown_tagged_fields_are_skipped() -> None:
    encoded = bytearray(encode_value(value(), 1))
    assert encoded[-1] == 0  # no tagged fields
    encoded[-1:] = bytes.fromhex("01" + "09" + "03" + "abcdef")  # one of tag 9, 3 bytes
    assert parse_value(bytes(encoded)) == value()


def test_partitions_of_an_empty_record_are_ignored() -> None:
    # Kafka's loader ignores them; a record of an Empty state with partitions is not
    # something Kafka writes, but reading one must not invent a transaction
    ongoing = bytearray(encode_value(value()))
    ongoing[16] = TransactionState.EMPTY
    loaded = parse_value(bytes(ongoing))
    assert loaded is not None
    assert loaded.partitions == frozenset()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (bytes.fromhex("0002") + bytes(40), "version 2"),
        (bytes.fromhex(JAVA_ONGOING_V0)[:-1], "truncated"),
        (bytes.fromhex(JAVA_ONGOING_V0)[:16] + b"\x09" + bytes(30), "state id 9"),
        # PreviousProducerId (an int64) in 4 bytes
        (bytes.fromhex(JAVA_EMPTY_V1)[:-1] + bytes.fromhex("010004ffffffff"), "has 4 bytes"),
    ],
    ids=["version", "truncated", "state", "tag size"],
)
def test_unreadable_values(data: bytes, message: str) -> None:
    with pytest.raises(RecordFormatError, match=message):
        parse_value(data)


@pytest.mark.parametrize(
    "data",
    [bytes.fromhex("0001000174"), bytes.fromhex("0000ffff"), bytes.fromhex("00000005")],
    ids=["version 1", "null string", "truncated"],
)
def test_unreadable_keys(data: bytes) -> None:
    with pytest.raises(RecordFormatError):
        parse_key(data)


def test_record_format_error_is_the_offsets_one() -> None:
    # callers that read both topics can catch one type
    assert issubclass(RecordFormatError, offsets_records.RecordFormatError)


def test_unsupported_write_version() -> None:
    with pytest.raises(ValueError):
        encode_value(value(), version=2)


@pytest.mark.parametrize(
    ("transactional_id", "partitions", "expected"),
    [
        # Utils.abs(id.hashCode) % partitions, as the group coordinator
        ("my-txn", 50, offsets_records.partition_for("my-txn", 50)),
        ("", 50, 0),
        # "polygenelubricants".hashCode() is Integer.MIN_VALUE, whose Utils.abs is 0
        ("polygenelubricants", 50, 0),
        ("a", 50, 97 % 50),
    ],
)
def test_partition_for(transactional_id: str, partitions: int, expected: int) -> None:
    assert partition_for(transactional_id, partitions) == expected

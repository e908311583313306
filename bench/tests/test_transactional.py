"""TX1's read check on TxnProducerPerf's result (no broker or JVM starts here)."""

import dataclasses

import pytest
from strom_bench import java_tools, transactional

# 1,000 committed transactions and 1 aborted, 100 records each over 6 partitions: every
# transaction wrote one marker to each partition.
GOOD = java_tools.TxnProducerResult(
    transactions=1000,
    timed_transactions=800,
    records_per_transaction=100,
    record_size=1024,
    partitions=6,
    transaction_version=0,
    seconds=20.0,
    records_per_s=4000.0,
    transactions_per_s=40.0,
    mb_per_s=3.9,
    txn_p50_ms=24.0,
    txn_p99_ms=50.0,
    txn_max_ms=80.0,
    commit_p50_ms=23.0,
    commit_p99_ms=49.0,
    committed_read=100_000,
    aborted_read=0,
    end_offsets=1001 * (100 + 6),
    stable_offsets=1001 * (100 + 6),
)


def test_a_run_that_read_back_what_it_committed_passes() -> None:
    assert transactional.expected_end_offsets(GOOD) == 106_106
    transactional.check_tx1(GOOD, 1000, 100)
    # fewer records than partitions: a marker only where a record went
    small = dataclasses.replace(
        GOOD, transactions=10, records_per_transaction=4, committed_read=40, end_offsets=88
    )
    transactional.check_tx1(dataclasses.replace(small, stable_offsets=88), 10, 4)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"committed_read": 99_900}, "gave 99,900 committed records, not 100,000"),
        ({"aborted_read": 100}, "gave 100 aborted records"),
        ({"stable_offsets": 106_000}, "last stable offsets 106,000 behind"),
        (  # markers missing (or records duplicated) though the reader counted right
            {"end_offsets": 106_100, "stable_offsets": 106_100},
            "high watermarks sum to 106,100, not 106,106",
        ),
        ({"transactions": 999}, "ran 999 transactions of 100, not 1,000 of 100"),
    ],
)
def test_a_broken_read_side_fails_the_run(change: dict[str, int], message: str) -> None:
    with pytest.raises(java_tools.ToolFailed, match=message):
        transactional.check_tx1(dataclasses.replace(GOOD, **change), 1000, 100)

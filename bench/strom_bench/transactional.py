"""TX1: a transactional producer's throughput (issue 18), on a broker of its own per side.

Each side's turn (first ``tx1_rounds`` rounds): a fresh single broker (as P1's), a topic of
``p1_partitions`` partitions, then `TxnProducerPerf` (bench/peer, the Java client P1 and P2
use): one producer with a transactional.id runs ``tx1_transactions`` transactions one after
the other, each ``tx1_records_per_transaction`` records of ``tx1_record_size`` bytes (record
i to partition i % partitions: every transaction spans every partition) and a commit. The
first ``tx1_warmup_transactions`` are not timed, as P1 leaves out its warm-up records.
TX1 = records per second of the timed transactions; TX1-txns = their transactions per
second (the same run; records per transaction is fixed, so the ratio is the same).

Then, untimed, the read side: one more transaction is aborted; once every partition's last
stable offset has reached its high watermark, a read_committed consumer reads the topic
from the start. ``check_tx1`` refuses the run unless it was given exactly the committed
records and none of the aborted ones, and the high watermarks hold exactly the records
plus one marker per partition per transaction, so a figure cannot come from a broken path.
"""

from __future__ import annotations

from strom_bench import brokers, java_tools, process_groups
from strom_bench.workloads import ADMIN_TIMEOUT_S, Turn, progress

TX1_TOPIC = "tx1"


def expected_end_offsets(result: java_tools.TxnProducerResult) -> int:
    """The high watermarks' sum after the run: every record of the committed transactions
    and of the aborted one, and a marker in each partition each of them wrote to."""
    per_txn = result.records_per_transaction
    touched = min(per_txn, result.partitions)
    return (result.transactions + 1) * (per_txn + touched)


def check_tx1(result: java_tools.TxnProducerResult, transactions: int, per_txn: int) -> None:
    """ToolFailed unless TxnProducerPerf's read_committed check found what was committed."""
    committed = transactions * per_txn
    problems = []
    if (result.transactions, result.records_per_transaction) != (transactions, per_txn):
        problems.append(
            f"ran {result.transactions:,} transactions of {result.records_per_transaction}, "
            f"not {transactions:,} of {per_txn}"
        )
    if result.committed_read != committed:
        problems.append(
            f"read_committed gave {result.committed_read:,} committed records, not {committed:,}"
        )
    if result.aborted_read:
        problems.append(f"read_committed gave {result.aborted_read:,} aborted records")
    if result.stable_offsets != result.end_offsets:
        problems.append(
            f"last stable offsets {result.stable_offsets:,} behind the high watermarks "
            f"{result.end_offsets:,}"
        )
    elif result.end_offsets != expected_end_offsets(result):
        problems.append(
            f"high watermarks sum to {result.end_offsets:,}, not {expected_end_offsets(result):,} "
            "(records plus one marker per partition per transaction)"
        )
    if problems:
        raise java_tools.ToolFailed("TX1's read check failed: " + "; ".join(problems))


def run_tx1(turn: Turn) -> None:
    """TX1 on a fresh broker of this side (see the module), in the plan's TX1 rounds."""
    plan = turn.plan
    if turn.round_no > plan.tx1_rounds:
        return
    broker = turn.new_broker("-tx1")
    tools = java_tools.JavaTools(turn.groups, broker.work_dir / "tools")
    try:
        broker.start()
        broker.wait_ready(tools)
        tools.create_topics(
            broker.bootstrap, [(TX1_TOPIC, plan.p1_partitions)], ADMIN_TIMEOUT_S, broker.process
        )
        result = tools.transactional_produce(
            broker.bootstrap,
            TX1_TOPIC,
            transactions=plan.tx1_transactions,
            records_per_transaction=plan.tx1_records_per_transaction,
            record_size=plan.tx1_record_size,
            warmup_transactions=plan.tx1_warmup_transactions,
            producer_properties=plan.tx1_producer_properties,
            timeout_s=plan.tool_timeout_s,
            broker=broker.process,
        )
        check_tx1(result, plan.tx1_transactions, plan.tx1_records_per_transaction)
        turn.record("TX1", result.records_per_s, "records/s")
        turn.record("TX1-txns", result.transactions_per_s, "transactions/s")
        progress(
            f"{turn.label} TX1: {result.timed_transactions:,} timed transactions of "
            f"{result.records_per_transaction} x {result.record_size} B in "
            f"{result.seconds:.2f} s ({result.mb_per_s:.1f} MB/s), transaction.version "
            f"{result.transaction_version}; per transaction p50 {result.txn_p50_ms:.1f} ms, "
            f"p99 {result.txn_p99_ms:.1f} ms, max {result.txn_max_ms:.1f} ms (commit p50 "
            f"{result.commit_p50_ms:.1f}, p99 {result.commit_p99_ms:.1f}); read_committed "
            f"read {result.committed_read:,} records, none aborted"
        )
    except (brokers.BrokerFailed, process_groups.BrokerExited, java_tools.ToolFailed) as e:
        turn.errors.append(f"{turn.label} TX1: {e}\n{broker.log_excerpt()}")
        progress(f"{turn.label} TX1 FAILED: {str(e).splitlines()[0]}")
    finally:
        broker.stop()

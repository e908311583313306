import pytest
from strom_bench import java_tools

TOTAL = (
    "100000 records sent, 57836.899942 records/sec (56.48 MB/sec), 133.24 ms avg latency, "
    "454.00 ms max latency, 130 ms 50th, 207 ms 95th, 217 ms 99th, 227 ms 99.9th."
)
STEADY = (
    "80000 steady state records sent, 86299.892125 records/sec (84.28 MB/sec), "
    "141.86 ms avg latency, 227.00 ms max latency, 152 ms 50th, 208 ms 95th, 218 ms 99th, "
    "227 ms 99.9th."
)
PROGRESS = (
    "150976 records sent, 30195.2 records/sec (29.49 MB/sec), 643.3 ms avg latency, "
    "944.0 ms max latency."
)


def test_producer_performance_prefers_the_steady_state_line() -> None:
    stdout = "\n".join(["Warmup first 20000 records.", PROGRESS, TOTAL, STEADY, ""])
    result = java_tools.parse_producer_performance(stdout)
    assert result.records == 80000
    assert result.records_per_s == pytest.approx(86299.892125)
    assert result.mb_per_s == pytest.approx(84.28)
    assert result.avg_latency_ms == pytest.approx(141.86)
    assert result.p99_latency_ms == 218


def test_producer_performance_without_warmup_uses_the_total() -> None:
    result = java_tools.parse_producer_performance(PROGRESS + "\n" + TOTAL + "\n")
    assert result.records == 100000
    assert result.mb_per_s == pytest.approx(56.48)


def test_producer_performance_without_summary_fails() -> None:
    with pytest.raises(java_tools.ToolFailed, match="no ProducerPerformance summary"):
        java_tools.parse_producer_performance(PROGRESS + "\n")


def test_consumer_and_latency_json_lines() -> None:
    consumer = java_tools.parse_consumer_result(
        "some log line\n"
        '{"records": 300000, "bytes": 307200000, "seconds": 1.339188, "mb_per_s": 218.766, '
        '"records_per_s": 224016.4}\n'
    )
    assert (consumer.records, consumer.mb_per_s) == (300000, 218.766)
    latency = java_tools.parse_latency_result(
        '{"sent": 30000, "received": 30000, "counted": 25000, "send_errors": 0, '
        '"p50_ms": 6.228, "p99_ms": 35.545, "p999_ms": 49.240, "max_ms": 54.230}'
    )
    assert (latency.counted, latency.p50_ms, latency.p99_ms) == (25000, 6.228, 35.545)
    assert (latency.p999_ms, latency.max_ms) == (49.24, 54.23)


TXN_LINE = (
    '{"transactions": 1000, "timed_transactions": 800, "records_per_transaction": 100, '
    '"record_size": 1024, "partitions": 6, "transaction_version": 2, "seconds": 4.000000, '
    '"records_per_s": 20000.0, "transactions_per_s": 200.00, "mb_per_s": 19.531, '
    '"txn_p50_ms": 4.500, "txn_p99_ms": 9.000, "txn_max_ms": 30.000, "commit_p50_ms": 4.000, '
    '"commit_p99_ms": 8.500, "committed_read": 100000, "aborted_read": 0, '
    '"end_offsets": 106106, "stable_offsets": 106106}'
)


def test_txn_producer_json_line() -> None:
    result = java_tools.parse_txn_producer_result("a log line\n" + TXN_LINE + "\n")
    assert (result.transactions, result.timed_transactions, result.partitions) == (1000, 800, 6)
    assert result.transaction_version == 2
    assert (result.committed_read, result.aborted_read) == (100000, 0)
    assert (result.records_per_s, result.transactions_per_s) == (20000.0, 200.0)
    assert result.commit_p99_ms == 8.5
    assert (result.end_offsets, result.stable_offsets) == (106106, 106106)


def test_txn_producer_line_missing_a_field_fails() -> None:
    with pytest.raises(java_tools.ToolFailed, match="lacks"):
        java_tools.parse_txn_producer_result(TXN_LINE.replace('"aborted_read": 0, ', ""))


def test_missing_json_line_fails() -> None:
    with pytest.raises(java_tools.ToolFailed, match="no JSON result line"):
        java_tools.last_json_line("nothing here\n")


def test_java_argv_puts_options_before_the_main_class() -> None:
    argv = java_tools.java_argv("Main", ["a", "b"], ["-Xmx1G"])
    assert argv[0] == "java"
    assert argv[1] == "-Xmx1G"
    assert argv[2].startswith("-Dlog4j2.configurationFile=")
    assert argv[3] == "-cp"
    assert argv[-3:] == ["Main", "a", "b"]

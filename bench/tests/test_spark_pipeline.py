"""SP1's figure from the pipeline's --progress-file, and the spark-submit it runs (no
Spark or broker starts here)."""

from typing import Any

import pytest
from strom_bench import spark_pipeline
from strom_bench.spark_pipeline import pipeline_throughput


def _batch(batch_id: int, rows: int, trigger_ms: int, query: str = "topic") -> dict[str, Any]:
    """A progress line as clickstream.py writes it: the query's name, then Spark's JSON."""
    return {
        "query": query,
        "name": query,
        "batchId": batch_id,
        "numInputRows": rows,
        "processedRowsPerSecond": rows / trigger_ms * 1000 if rows else 0.0,
        "durationMs": {"addBatch": trigger_ms - 100, "triggerExecution": trigger_ms},
    }


def test_rows_over_summed_batch_time_without_the_warm_up_batch() -> None:
    progress = [
        _batch(0, 50_000, 6_000),  # warm-up: left out
        _batch(1, 50_000, 1_000),
        _batch(2, 50_000, 1_500),
        _batch(3, 50_000, 2_500),
    ]
    result = pipeline_throughput(progress)
    assert (result.records, result.batches, result.total_records) == (150_000, 3, 200_000)
    assert result.seconds == pytest.approx(5.0)
    assert result.first_batch_s == pytest.approx(6.0)
    # weighted by rows: 150,000 / 5 s, not the mean of 50k, 33k and 20k rows/s
    assert result.records_per_s == pytest.approx(30_000)


def test_a_short_tail_batch_and_no_data_batches_are_left_out_but_their_rows_counted() -> None:
    progress = [
        _batch(0, 49_999, 6_000),
        _batch(1, 49_998, 1_000),
        _batch(2, 49_999, 1_000),
        _batch(3, 9, 500),  # the backlog's rounding remainder: fixed cost only
        _batch(4, 0, 600),  # available-now's closing no-data batch
    ]
    result = pipeline_throughput(progress)
    assert (result.records, result.batches) == (99_997, 2)
    assert result.batch_seconds == (1.0, 1.0)
    assert result.total_records == 150_005  # every row read, for the harness's check


def test_only_the_named_query_counts_in_batch_order() -> None:
    progress = [
        _batch(2, 10_000, 1_000),
        _batch(0, 10_000, 9_000, query="parquet"),
        _batch(1, 10_000, 2_000),
        _batch(0, 10_000, 5_000),
    ]
    result = pipeline_throughput(progress)
    assert result.first_batch_s == pytest.approx(5.0)  # batch 0, though written last
    assert result.records_per_s == pytest.approx(20_000 / 3.0)


def test_a_backlog_read_in_one_batch_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        pipeline_throughput([_batch(0, 300_000, 9_000), _batch(1, 0, 500)])


def test_the_pipeline_runs_on_a_local_master_and_stops_once_the_backlog_is_read(
    tmp_path: Any,
) -> None:
    argv = spark_pipeline.submit_argv("127.0.0.1:9092", tmp_path, 50_000)
    assert argv[argv.index("--master") + 1] == spark_pipeline.SPARK_MASTER
    job = argv.index(str(spark_pipeline.JOB))
    assert spark_pipeline.JOB.is_file()
    job_args = argv[job + 1 :]
    assert job_args[job_args.index("--trigger") + 1] == "available-now"
    assert job_args[job_args.index("--max-offsets-per-trigger") + 1] == "50000"
    assert job_args[job_args.index("--bootstrap-servers") + 1] == "127.0.0.1:9092"
    assert job_args[job_args.index("--progress-file") + 1] == str(
        spark_pipeline.progress_path(tmp_path)
    )

"""How legacy-log-dir/ was made: run with Strom as of commit c069935 (per-partition
checkpoint files), then ``printf 'torn tail' >> legacy-2/00000000000000000012.log``.

    PYTHONPATH=<old checkout>/broker-image/src python make_legacy_log_dir.py legacy-log-dir

Three partitions of topic ``legacy``: -0 and -1 closed cleanly (-1 after DeleteRecords to
offset 4), -2 crashed after a flush at offset 12 and one more batch, then got a torn tail.
"""

import sys
from pathlib import Path

from strom.records import batches
from strom.storage import log_config, partition_log

NOW = 1_700_000_000_000


def append(log: partition_log.PartitionLog, values: list[bytes]) -> None:
    batch = bytearray(batches.build_batch([(None, v, [], NOW) for v in values]))
    headers = batches.validate_produce_batches(memoryview(batch), 1 << 20)
    log.append(batch, headers, 3, NOW)
    log.update_high_watermark(log.log_end_offset)


def main(root: Path) -> None:
    config = log_config.LogConfig(segment_bytes=400, index_interval_bytes=100)
    for p in range(3):
        log = partition_log.PartitionLog.open(root / f"legacy-{p}", config, lambda: NOW)
        for i in range(10 + p):
            append(log, [f"p{p}-{i}".encode().ljust(60, b".")])
        if p == 1:
            log.delete_records_before(4)
        if p == 2:
            log.flush()
            append(log, [b"after-flush"])
            log.close_handles()
        else:
            log.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]))

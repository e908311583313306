"""The bounded pool of open files: eviction, handles in use, reopening, and logs under it."""

import gc
import os
import weakref

from strom.storage import file_handles, log_config, log_manager

CONFIG = log_config.LogConfig()


def test_the_least_recently_used_file_is_evicted(tmp_path) -> None:
    cache = file_handles.HandleCache(max_open=2)
    files = []
    for name in "abc":
        (tmp_path / name).write_bytes(name.encode() * 10)
        files.append(cache.file(tmp_path / name, "rb"))
    files[0].get()
    files[1].get()
    files[0].get()  # now b is the least recently used
    files[2].get()
    assert [f.is_open for f in files] == [True, False, True]
    assert cache.open_count == 2
    assert cache.evictions == 1


def test_an_evicted_file_reopens_and_reads_the_same_bytes(tmp_path) -> None:
    cache = file_handles.HandleCache(max_open=1)
    first = cache.file(tmp_path / "first", "rb")
    other = cache.file(tmp_path / "other", "rb")
    (tmp_path / "first").write_bytes(b"0123456789")
    (tmp_path / "other").write_bytes(b"x")
    before = os.pread(first.get().fileno(), 10, 0)
    other.get()
    assert not first.is_open
    assert os.pread(first.get().fileno(), 10, 0) == before == b"0123456789"
    assert cache.opens == 3


def test_a_handle_in_use_survives_eviction_and_closes_when_let_go(tmp_path) -> None:
    cache = file_handles.HandleCache(max_open=1)
    (tmp_path / "in-flight").write_bytes(b"response bytes")
    (tmp_path / "other").write_bytes(b"x")
    held = cache.file(tmp_path / "in-flight", "rb").get()
    cache.file(tmp_path / "other", "rb").get()  # evicts the file held above
    assert cache.open_count == 1
    assert not held.closed
    assert os.pread(held.fileno(), 100, 0) == b"response bytes"
    gone = weakref.ref(held)
    del held
    churn(cache, tmp_path, file_handles.EVICTED_KEPT)
    gc.collect()
    assert gone() is None


def churn(cache: file_handles.HandleCache, directory, evictions: int) -> None:
    """Open files until ``evictions`` more evictions have happened."""
    target = cache.evictions + evictions
    number = 0
    while cache.evictions < target:
        path = directory / f"churn-{number}"
        path.write_bytes(b"")
        cache.file(path, "rb").get()
        number += 1


def test_an_evicted_descriptor_stays_valid_for_a_while_even_unheld(tmp_path) -> None:
    """A caller that took the number and dropped the object (fileno() then pread) does not
    read another file's bytes if a thread evicts in between: the number is not reused
    until EVICTED_KEPT more evictions; then the file closes and the count is bounded."""
    cache = file_handles.HandleCache(max_open=1)
    (tmp_path / "a").write_bytes(b"bytes of a")
    fd = cache.file(tmp_path / "a", "rb").get().fileno()
    churn(cache, tmp_path, file_handles.EVICTED_KEPT - 1)
    assert os.pread(fd, 100, 0) == b"bytes of a"
    descriptors = len(os.listdir("/proc/self/fd"))
    churn(cache, tmp_path, 100)
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) <= descriptors + 1


def test_fetch_ranges_outlive_eviction_across_many_logs(tmp_path, clock, harness) -> None:
    """More partitions than open files: every read range stays readable (reopened if its
    file was evicted), and a file taken from a range stays open while it is held."""
    manager = log_manager.LogManager([tmp_path / "logs"], clock, max_open_files=4)
    logs = [manager.get_or_create("t", p, CONFIG) for p in range(20)]
    for round_no in range(3):  # appends rotate over the logs: write handles are evicted too
        for p, log in enumerate(logs):
            harness.append(log, [f"{p}-{round_no}".encode()])
    assert manager.handles.open_count <= 4
    descriptors = len(os.listdir("/proc/self/fd"))
    results = [log.read(0, 1 << 20, log.high_watermark) for log in logs]
    # Ranges hold no descriptor of their own: 20 of them keep no more than 4 files open.
    assert manager.handles.open_count <= 4
    assert len(os.listdir("/proc/self/fd")) <= descriptors + 4
    assert manager.handles.evictions > 0
    for p, result in enumerate(results):
        assert [r.value for r in harness.decoded(result)] == [
            f"{p}-{round_no}".encode() for round_no in range(3)
        ]
    held = results[-1].ranges[0].file  # the most recent: still in the cache at close
    manager.close_all()
    assert manager.handles.open_count == 0
    # Ranges still held after close read the same bytes; the files close when let go.
    assert not held.closed
    assert [r.value for r in harness.decoded(results[-1])] == [b"19-0", b"19-1", b"19-2"]
    gone = weakref.ref(held)
    del held, results, result
    churn(manager.handles, tmp_path, file_handles.EVICTED_KEPT)
    gc.collect()
    assert gone() is None


def test_a_log_manager_opens_and_serves_more_partitions_than_its_limit(
    tmp_path, clock, harness
) -> None:
    first = log_manager.LogManager([tmp_path], clock, max_open_files=8)
    for p in range(100):
        harness.append(first.get_or_create("many", p, CONFIG), [str(p).encode()])
    first.close_all()
    second = log_manager.LogManager([tmp_path], clock, max_open_files=8)
    second.load_all(lambda topic: CONFIG)
    assert second.handles.open_count <= 8
    for p in (0, 57, 99):
        log = second.get("many", p)
        assert log is not None
        harness.append(log, [b"more"])
        assert [r.value for r in harness.decoded(log.read(0, 1 << 20, log.high_watermark))] == [
            str(p).encode(),
            b"more",
        ]
    assert second.handles.open_count <= 8
    second.close_all()

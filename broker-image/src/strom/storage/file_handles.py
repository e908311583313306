"""A bounded pool of open file handles, shared by every log of a ``LogManager``.

Kafka keeps every segment's file open and asks operators to raise RLIMIT_NOFILE. Strom opens
segment and index files on demand through a ``HandleCache`` instead and keeps at most
``max_open`` of them open, closing the least recently used; a file evicted is reopened by
path on its next use. So 20,000 partitions run under a descriptor limit of 1,024.

A handle handed out (a fetch's ``FileRange`` holds the file object until the response is
sent with sendfile or pread) stays valid after eviction: eviction only drops the cache's
reference, and the descriptor is closed when the last holder lets go of the object
(CPython finalizes it at once). The pool counts the handles it holds; handles still held by
responses in flight come on top, so keep ``max_open`` well under the process limit
(``default_max_open`` takes half of it).

Whoever uses a descriptor must hold the file object while doing so (``file.fileno()`` then
``os.pread`` on the int, with the object dropped in between, relies on the cache still
holding it). As a guard for callers that do not, and since worker threads (the cleaner,
``create_many``) use the cache too, the last ``EVICTED_KEPT`` evicted handles stay open a
little longer: an evicted descriptor is not closed, and its number not reused, until that
many further evictions have happened. So at most ``max_open + EVICTED_KEPT`` files are
open, plus those held by readers.

Thread-safe: a worker thread creating partitions (``LogManager.create_many``) and the
event loop may use one cache at once.
"""

from __future__ import annotations

import collections
import io
import resource
import threading
from pathlib import Path
from typing import BinaryIO

# With no RLIMIT_NOFILE (infinity) or a huge one, more open files buy nothing measurable.
_MAX_DEFAULT = 65_536
_MIN_OPEN = 8
EVICTED_KEPT = 32


def default_max_open() -> int:
    """Half the process's soft RLIMIT_NOFILE (the rest for sockets and the like), capped."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return _MAX_DEFAULT
    return max(_MIN_OPEN, min(soft // 2, _MAX_DEFAULT))


class _SharedFile(io.FileIO):
    """A file object that closes quietly when its last reference goes (after eviction)."""

    def __del__(self) -> None:
        if not self.closed:
            self.close()


class HandleCache:
    """Least-recently-used open files; see the module docstring."""

    def __init__(self, max_open: int | None = None) -> None:
        limit = default_max_open() if max_open is None else max_open
        if limit < 1:
            raise ValueError(f"max_open must be positive, not {limit}")
        self.max_open = limit
        self._open: collections.OrderedDict[CachedFile, None] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._recently_evicted: collections.deque[BinaryIO] = collections.deque(maxlen=EVICTED_KEPT)
        self.opens = 0  # files opened, first time or after eviction
        self.evictions = 0

    @property
    def open_count(self) -> int:
        return len(self._open)

    def file(self, path: Path, mode: str) -> CachedFile:
        """A file of this cache, opened on first use (``mode``: "rb" or "ab")."""
        return CachedFile(self, path, mode)

    def _get(self, entry: CachedFile) -> BinaryIO:
        with self._lock:
            handle = entry._handle
            if handle is not None:
                self._open.move_to_end(entry)
                return handle
            handle = _SharedFile(entry.path, entry.mode)
            self.opens += 1
            entry._handle = handle
            self._open[entry] = None
            while len(self._open) > self.max_open:
                evicted, _ = self._open.popitem(last=False)
                # Dropping the last reference (EVICTED_KEPT evictions later) closes the
                # file unless a reader still holds it.
                if evicted._handle is not None:
                    self._recently_evicted.append(evicted._handle)
                evicted._handle = None
                self.evictions += 1
            return handle

    def _drop(self, entry: CachedFile, close: bool) -> None:
        with self._lock:
            handle = entry._handle
            if handle is None:
                return
            entry._handle = None
            del self._open[entry]
        if close:
            handle.close()

    def close_all(self) -> None:
        """Let go of every handle (shutdown): each closes now unless a reader still holds it."""
        with self._lock:
            entries = list(self._open)
            self._open.clear()
            self._recently_evicted.clear()
            for entry in entries:
                entry._handle = None


class CachedFile:
    """One file opened on demand through a ``HandleCache``; ``path`` may change (renames)."""

    __slots__ = ("_cache", "_handle", "mode", "path")

    def __init__(self, cache: HandleCache, path: Path, mode: str) -> None:
        self._cache = cache
        self.path = path
        self.mode = mode
        self._handle: BinaryIO | None = None

    @property
    def is_open(self) -> bool:
        return self._handle is not None

    def get(self) -> BinaryIO:
        """The open file: the cached handle, or the file (re)opened by path."""
        return self._cache._get(self)

    def release(self) -> None:
        """Give the handle back to the pool: dropped, and closed once nobody holds it."""
        self._cache._drop(self, close=False)

    def close(self) -> None:
        """Close the handle now (writers: nothing reads through them)."""
        self._cache._drop(self, close=True)


_default_cache: HandleCache | None = None
_default_lock = threading.Lock()


def default_cache() -> HandleCache:
    """The process-wide cache used by logs opened without one (tests, tools)."""
    global _default_cache
    with _default_lock:
        if _default_cache is None:
            _default_cache = HandleCache()
        return _default_cache

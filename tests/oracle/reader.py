"""Several capture files read side by side, merged in time order: the
oracle's reading of rotated captures (native/src/capture.rs does it for the
Rust core), over the package's one-file reader ``capture.read_frames``."""

from __future__ import annotations

import heapq
from collections.abc import Generator, Iterator

from nfstrace.parsers.capture import CHUNK, MIN_CHUNK, CaptureInfo, Frame, read_frames
from nfstrace.parsers.resync import MAX_CAPLEN

# All the files read side by side share this many bytes of reading buffers,
# each at least MIN_CHUNK: 1,250 files must not hold 4 MiB each
# (native/src/capture.rs mirrors it).
READ_BUDGET = 256 * 1024 * 1024


def chunk_bytes(files: int) -> int:
    """Bytes read at a time from each of ``files`` files read side by side."""
    return min(CHUNK, max(MIN_CHUNK, READ_BUDGET // max(files, 1)))


def read_many(
    paths: list[str], infos: list[CaptureInfo], max_frame: int = MAX_CAPLEN
) -> Iterator[Frame]:
    """Frames of several files merged in time order (rotated captures).

    The merge trusts each file to be in time order, as tcpdump writes them.
    """
    if len(paths) == 1:
        return read_frames(paths[0], 0, infos[0], max_frame)
    return _merged(paths, infos, max_frame, chunk_bytes(len(paths)))


def _merged(
    paths: list[str], infos: list[CaptureInfo], max_frame: int, chunk: int
) -> Iterator[Frame]:
    """heapq.merge of every file's frames by time (ties: the earlier file
    first), each file opened only when its first frame is due and closed at its
    end: a directory of thousands of rotated files holds one or two open, not
    all of them (their descriptors, their buffers).  Each file's first frame is
    read beforehand, one file at a time, to know when it is due (and every
    unreadable file is said before any frame is handed out)."""
    heap: list[tuple[int, int, Frame | None, Generator[Frame, None, None] | None]] = []
    for i, (path, info) in enumerate(zip(paths, infos, strict=True)):
        first = read_frames(path, i, CaptureInfo(path=path), max_frame, MIN_CHUNK)
        try:
            frame = next(first, None)
        finally:
            first.close()
        if frame is None:  # no frame: read it for its facts now (nothing to merge)
            for _ in read_frames(path, i, info, max_frame, MIN_CHUNK):
                pass
        else:
            heap.append((frame[0], i, None, None))
    heapq.heapify(heap)
    try:
        while heap:
            ts, i, frame, frames = heap[0]
            if frames is None:  # due: opened now (its first frame again)
                frames = read_frames(paths[i], i, infos[i], max_frame, chunk)
                heap[0] = (ts, i, None, frames)  # (closed below if it fails)
                frame = next(frames, None)
                if frame is None:  # (it changed under us)
                    heapq.heappop(heap)
                    continue
            assert frame is not None
            yield frame
            following = next(frames, None)
            if following is None:
                heapq.heappop(heap)
            else:
                heapq.heapreplace(heap, (following[0], i, following, frames))
    finally:  # an error, or the reader stopped early: the files open are closed now
        for *_, frames in heap:
            if frames is not None:
                frames.close()

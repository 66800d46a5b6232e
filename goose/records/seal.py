"""Sealed results files: the rows of a results file `X.jsonl` kept mostly xz-compressed, so that the
tracked results stay small: `python -m goose.records.seal results` (or `make pack-results`).

A results file is a logical file of up to two parts: the sealed part `X.jsonl.xz` (the rows sealed so
far, compressed) followed by the tail `X.jsonl` (plain, where `append_row` appends, exactly as before).
Its logical byte stream is the decompressed sealed part followed by the tail's bytes; byte offsets into
a results file (`goose.records.results.read_appended`) are offsets into that stream, which a seal leaves
unchanged, so an offset taken before a seal still points after the same rows.

`seal` moves the tail into the sealed part under the append lock, in three steps that a reader, or a
crash between them, never sees half done: (1) the new sealed part is written whole to
`X.jsonl.xz.pending` (a temporary file renamed into place), (2) the tail is removed, (3) the pending
part replaces `X.jsonl.xz`. Where a tail exists, the sealed part is `X.jsonl.xz` and a pending part is
ignored (a seal cut short before step 2: the tail still holds its rows); where none does, a pending
part is the sealed part (a seal between steps 2 and 3). The next append or seal finishes or drops a
pending part first. Readers take no lock: `read_from` opens the parts, then checks that the tail is
still the one it opened (a seal removes it before it replaces the sealed part), else opens them again.

A JSON record (not rows) may also be kept compressed as `X.json.xz`: `read_json(X.json)` reads either.
"""

from __future__ import annotations

import json
import lzma
import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO

from filelock import FileLock

SEALED_SUFFIX = ".xz"
PENDING_SUFFIX = ".pending"
# Rows are repetitive JSON: the strongest preset seals ~4 MB/s to about 1/16 of the size (~700 MB of memory).
PRESET = 9 | lzma.PRESET_EXTREME

# (st_dev, st_ino, st_size, st_mtime_ns) of a sealed part -> its decompressed size, so that a reader
# polling for new rows from an offset past the sealed part does not decompress it again.
_sealed_sizes: dict[tuple[int, int, int, int], int] = {}


def tail_path(path: str | Path) -> Path:
    """The plain part of the results file that `path` names (`X.jsonl` for `X.jsonl`, `X.jsonl.xz` or
    `X.jsonl.xz.pending`): the logical file's name."""
    path = Path(path)
    for suffix in (PENDING_SUFFIX, SEALED_SUFFIX):
        if path.name.endswith(suffix):
            path = path.with_name(path.name.removesuffix(suffix))
    return path


def sealed_path(path: str | Path) -> Path:
    """The sealed part of the results file `path`: `X.jsonl.xz`."""
    tail = tail_path(path)
    return tail.with_name(tail.name + SEALED_SUFFIX)


def pending_path(path: str | Path) -> Path:
    """Where `seal` writes the new sealed part before it replaces the old one: `X.jsonl.xz.pending`."""
    sealed = sealed_path(path)
    return sealed.with_name(sealed.name + PENDING_SUFFIX)


def part_paths(path: str | Path) -> list[Path]:
    """The parts of the results file `path` that exist (sealed, pending, tail)."""
    return [p for p in (sealed_path(path), pending_path(path), tail_path(path)) if p.is_file()]


def results_files(root: str | Path, pattern: str = "*.jsonl", recursive: bool = True) -> list[Path]:
    """Every results file below the folder `root` whose name matches `pattern` (recursively, or only in
    `root` itself), sealed or not, once each, by its logical name (`tail_path`), sorted."""
    root = Path(root)
    if not root.is_dir():
        return []
    find = root.rglob if recursive else root.glob
    names = {pattern, pattern + SEALED_SUFFIX, pattern + SEALED_SUFFIX + PENDING_SUFFIX}
    return sorted({tail_path(p) for name in names for p in find(name) if p.is_file()})


def append_lock(path: str | Path) -> FileLock:
    """The exclusive lock that every append to, and every seal of, the results file `path` holds: a
    `FileLock` on `<X.jsonl>.append.lock` beside it. A separate file, since `FileLock` opens (and
    creates) the file it locks, and not the runner's AR-reference lock `<path>.lock`, which is held for
    a whole generation that appends of other jobs must not wait for. The lock file stays after release
    (deleting it would let two processes lock two different files of one name)."""
    tail = tail_path(path)
    return FileLock(tail.with_name(tail.name + ".append.lock"))


def finish_pending(path: str | Path) -> None:
    """Finish a seal of `path` that was cut short (the caller holds `append_lock(path)`): a pending
    sealed part replaces the sealed part where the tail is gone, and is dropped where the tail is
    still there (it holds those rows)."""
    pending = pending_path(path)
    if not pending.is_file():
        return
    if tail_path(path).exists():
        pending.unlink()
    else:
        os.replace(pending, sealed_path(path))


def _open(path: Path) -> BinaryIO | None:
    try:
        return path.open("rb")
    except FileNotFoundError:
        return None


def _is_open_file(path: Path, fh: BinaryIO) -> bool:
    """Whether `path` still names the file that `fh` has open."""
    try:
        now = path.stat()
    except FileNotFoundError:
        return False
    opened = os.fstat(fh.fileno())
    return (now.st_dev, now.st_ino) == (opened.st_dev, opened.st_ino)


def _open_parts(path: str | Path) -> tuple[BinaryIO | None, BinaryIO | None]:
    """(the sealed part, the tail) of the results file `path`, opened as one consistent state of it
    (module docstring); either may be None."""
    tail_file = tail_path(path)
    while True:
        tail = _open(tail_file)
        if tail is None:
            pending = _open(pending_path(path))
            return (pending if pending is not None else _open(sealed_path(path))), None
        sealed = _open(sealed_path(path))
        if _is_open_file(tail_file, tail):
            return sealed, tail
        tail.close()
        if sealed is not None:
            sealed.close()


def _sealed_key(fh: BinaryIO) -> tuple[int, int, int, int]:
    st = os.fstat(fh.fileno())
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _sealed_bytes(fh: BinaryIO, offset: int) -> tuple[bytes, int]:
    """(the decompressed bytes of the sealed part `fh` from `offset` on, its decompressed size); the
    size of a part seen before comes from a cache when `offset` is past it."""
    key = _sealed_key(fh)
    size = _sealed_sizes.get(key)
    if size is not None and offset >= size:
        return b"", size
    data = lzma.decompress(fh.read())
    if len(_sealed_sizes) > 4096:
        _sealed_sizes.clear()
    _sealed_sizes[key] = len(data)
    return data[offset:], len(data)


def read_from(path: str | Path, offset: int = 0) -> bytes:
    """The bytes of the results file `path` (`X.jsonl` or `X.jsonl.xz`) from logical byte `offset` on:
    of its sealed part's decompressed bytes followed by its tail's; b"" for a missing file."""
    sealed, tail = _open_parts(path)
    try:
        head, size = _sealed_bytes(sealed, offset) if sealed is not None else (b"", 0)
        if tail is None:
            return head
        tail.seek(max(0, offset - size))
        return head + tail.read()
    finally:
        for fh in (sealed, tail):
            if fh is not None:
                fh.close()


def replace_atomically(path: Path, payload: bytes) -> None:
    """Write `payload` to `path` whole or not at all: a temporary file, fsynced, renamed into place (never a
    torn file: results files, their sealed parts, the runner's checkpoints)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def seal(path: str | Path) -> bool:
    """Move the tail of the results file `path` into its sealed part (module docstring: how, safely
    against readers and crashes); True if there was a tail to seal. The logical bytes stay the same,
    except that a cut last line of the tail is sealed off with a newline, as the next append would
    do. Idempotent: a file without a tail (or with an empty one) is left as it is."""
    tail_file = tail_path(path)
    with append_lock(tail_file):
        finish_pending(tail_file)
        if not tail_file.is_file() or tail_file.stat().st_size == 0:
            return False
        rows = tail_file.read_bytes()
        if not rows.endswith(b"\n"):
            rows += b"\n"
        sealed = sealed_path(tail_file)
        store_sealed(tail_file, (lzma.decompress(sealed.read_bytes()) if sealed.is_file() else b"") + rows)
    return True


def store_sealed(path: str | Path, logical: bytes) -> None:
    """Make `logical` the whole content of the results file `path`, all of it sealed (the caller holds
    `append_lock(path)`): the pending part, the tail removed, the pending part in place (module
    docstring)."""
    payload = lzma.compress(logical, preset=PRESET)
    sealed = sealed_path(path)
    if lzma.decompress(payload) != logical:  # never remove a tail whose rows are not safely sealed
        raise OSError(f"{sealed}: the compressed rows do not read back")
    pending = pending_path(path)
    replace_atomically(pending, payload)
    tail_path(path).unlink(missing_ok=True)
    os.replace(pending, sealed)


def seal_tree(root: str | Path) -> list[Path]:
    """Seal every results file (`*.jsonl`) below the folder `root`; the files that had a tail."""
    return [f for f in results_files(root) if seal(f)]


def copy_results_file(src: str | Path, dst: str | Path) -> Path:
    """Make the results file `dst` hold the rows of `src` (either sealed or not) and nothing else: under
    `dst`'s append lock, its old parts removed (a sealed part left by an earlier copy would come
    first), the logical bytes of `src` written plain; the file written."""
    dst = tail_path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    with append_lock(dst):
        for part in part_paths(dst):
            part.unlink()
        replace_atomically(dst, read_from(src))
    return dst


def stored_bytes(files: Iterable[Path]) -> int:
    """Bytes on disk of every part of the results files `files`."""
    return sum(p.stat().st_size for f in files for p in part_paths(f))


def read_json(path: str | Path) -> Any:
    """The JSON document `path` (`X.json`), or where only `X.json.xz` is there, the decompressed one."""
    path = Path(path)
    packed = path.with_name(path.name + SEALED_SUFFIX)
    if not path.is_file() and packed.is_file():
        return json.loads(lzma.decompress(packed.read_bytes()))
    return json.loads(path.read_text())


def write_json_xz(path: str | Path, document: Any) -> Path:
    """Write `document` compressed as `X.json.xz` for `path` = `X.json`, and remove a plain `X.json`
    (`read_json` reads either); the file written."""
    path = Path(path)
    packed = path.with_name(path.name + SEALED_SUFFIX)
    packed.parent.mkdir(parents=True, exist_ok=True)
    replace_atomically(packed, lzma.compress(json.dumps(document).encode(), preset=PRESET))
    path.unlink(missing_ok=True)
    return packed


def main(argv: list[str]) -> None:
    """`python -m goose.records.seal FOLDER...`: seal every results file below each folder, printing
    the bytes its results files take before and after."""
    for arg in argv or ["results"]:
        files = results_files(arg)
        before = stored_bytes(files)
        sealed = seal_tree(arg)
        after = stored_bytes(files)
        print(f"{arg}: {len(sealed)} of {len(files)} results files sealed, {before:,} -> {after:,} bytes")


if __name__ == "__main__":
    main(sys.argv[1:])

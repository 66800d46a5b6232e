"""experiments.gpu.carry: a compressed file split for two device calls joins and decompresses back
bit for bit, a corrupted part is refused, and `unpack` waits for the missing part, then joins (no
GPU, no network)."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from experiments.gpu.carry import compress, join, part_sizes, sha256, split, unpack


def test_a_split_file_joins_back_and_a_corrupted_part_is_refused(tmp_path):
    src = tmp_path / "model.gguf"
    src.write_bytes(os.urandom(3 << 20) + bytes(1 << 20) + b"tail")
    packed = tmp_path / "model.gguf.xz"
    compress(src, packed)
    assert packed.stat().st_size < src.stat().st_size - (1 << 19)  # the zeros compress
    size = packed.stat().st_size
    parts = [tmp_path / f"model.gguf.xz.{i}" for i in range(3)]
    split(packed, [(1 << 20) + 7, 1 << 20], parts)
    assert [p.stat().st_size for p in parts] == [(1 << 20) + 7, 1 << 20, size - (2 << 20) - 7]
    joined = tmp_path / "out" / "model.gguf"
    joined.parent.mkdir()
    join(list(parts), joined, sha256(packed), sha256(src))
    assert joined.read_bytes() == src.read_bytes()

    joined.unlink()
    data = bytearray(parts[1].read_bytes())
    data[100] ^= 1
    parts[1].write_bytes(bytes(data))
    with pytest.raises(ValueError, match="sha256"):
        join(list(parts), joined, sha256(packed), sha256(src))
    assert not joined.exists() and not list(joined.parent.iterdir())

    parts[1].write_bytes(bytes(data[:100]) + bytes([data[100] ^ 1]) + bytes(data[101:]))
    with pytest.raises(ValueError, match="decompressed to sha256"):  # the right parts, a wrong model
        join(list(parts), joined, sha256(packed), sha256(packed))
    assert not joined.exists() and not list(joined.parent.iterdir())


def test_the_parts_fill_every_call_alike_and_grow_in_number_with_the_tree():
    mib = 1 << 20
    assert part_sizes(94 * mib, 2 * mib, 50 * mib) == [46 * mib, 48 * mib]  # 48 MiB a call
    sizes = part_sizes(94 * mib, 2 * mib, 43 * mib)  # a larger tracked tree: three calls
    assert sizes == [30 * mib, 32 * mib, 32 * mib] and sum(sizes) == 94 * mib
    with pytest.raises(SystemExit, match="do not fit 9 uploads"):
        part_sizes(94 * mib, 2 * mib, 2 * mib)


def test_unpack_waits_for_the_second_call_then_joins(tmp_path):
    src = tmp_path / "m.gguf"
    src.write_bytes(os.urandom(1 << 16))
    packed = tmp_path / "m.gguf.xz"
    compress(src, packed)
    here = tmp_path / "here"
    for i in (1, 2):
        (here / f"part{i}").mkdir(parents=True)
    split(packed, [1000], [here / "part1" / "m.gguf.xz.0", here / "part2" / "m.gguf.xz.1"])
    manifest = {
        "gguf": "m.gguf",
        "bytes": 1 << 16,
        "sha256": sha256(src),
        "packed_sha256": sha256(packed),
        "parts": ["m.gguf.xz.0", "m.gguf.xz.1"],
    }
    for i in (1, 2):
        (here / f"part{i}" / "MANIFEST.json").write_text(json.dumps(manifest))
    (here / "part1" / "data" / "gsm8k").mkdir(parents=True)
    (here / "part1" / "data" / "gsm8k" / "test.jsonl").write_text("{}\n")

    there = tmp_path / "there"  # the device: the first call carries part1 only
    shutil.copytree(here / "part1", there / "part1")
    assert unpack(there) == "m.gguf: waiting for m.gguf.xz.1"
    assert (there / "data" / "gsm8k" / "test.jsonl").is_file()
    shutil.rmtree(there / "part1")  # not carried again; what unpack moved stays
    shutil.copytree(here / "part2", there / "part2")
    assert unpack(there) == "m.gguf ready"
    assert (there / "model" / "m.gguf").read_bytes() == src.read_bytes()

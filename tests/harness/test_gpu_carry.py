"""experiments.gpu_carry: a file split for two device calls joins back bit for bit, a corrupted
part is refused, and `unpack` waits for the missing part, then joins (no GPU, no network)."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from experiments.gpu_carry import join, sha256, split, unpack


def test_a_split_file_joins_back_and_a_corrupted_part_is_refused(tmp_path):
    src = tmp_path / "model.gguf"
    src.write_bytes(os.urandom(3 << 20) + b"tail")
    parts = (tmp_path / "model.gguf.0", tmp_path / "model.gguf.1")
    split(src, (1 << 20) + 7, parts)
    assert parts[0].stat().st_size == (1 << 20) + 7
    assert parts[0].stat().st_size + parts[1].stat().st_size == src.stat().st_size
    joined = tmp_path / "out" / "model.gguf"
    joined.parent.mkdir()
    join(list(parts), joined, sha256(src))
    assert joined.read_bytes() == src.read_bytes()

    joined.unlink()
    data = bytearray(parts[1].read_bytes())
    data[100] ^= 1
    parts[1].write_bytes(bytes(data))
    with pytest.raises(ValueError, match="sha256"):
        join(list(parts), joined, sha256(src))
    assert not joined.exists() and not list(joined.parent.iterdir())


def test_unpack_waits_for_the_second_call_then_joins(tmp_path):
    src = tmp_path / "m.gguf"
    src.write_bytes(os.urandom(1 << 16))
    here = tmp_path / "here"
    for i in (1, 2):
        (here / f"part{i}").mkdir(parents=True)
    split(src, 1000, (here / "part1" / "m.gguf.0", here / "part2" / "m.gguf.1"))
    manifest = {"gguf": "m.gguf", "bytes": 1 << 16, "sha256": sha256(src), "parts": ["m.gguf.0", "m.gguf.1"]}
    for i in (1, 2):
        (here / f"part{i}" / "MANIFEST.json").write_text(json.dumps(manifest))
    (here / "part1" / "data" / "gsm8k").mkdir(parents=True)
    (here / "part1" / "data" / "gsm8k" / "test.jsonl").write_text("{}\n")

    there = tmp_path / "there"  # the device: the first call carries part1 only
    shutil.copytree(here / "part1", there / "part1")
    assert unpack(there) == "m.gguf: waiting for m.gguf.1"
    assert (there / "data" / "gsm8k" / "test.jsonl").is_file()
    shutil.rmtree(there / "part1")  # not carried again; what unpack moved stays
    shutil.copytree(here / "part2", there / "part2")
    assert unpack(there) == "m.gguf ready"
    assert (there / "model" / "m.gguf").read_bytes() == src.read_bytes()

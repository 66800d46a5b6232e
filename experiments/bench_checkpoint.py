"""Resuming `make bench` (experiments/bench.py) at the prompt where it was cut short.

The full protocol (5 benchmarks x 20 prompts x 3 repeats x 9 contenders) runs for hours on a 2-core
CPU, longer than some sessions; a run cut short (Ctrl-C, a session that ends, a killed job) must
not lose what it measured. After each prompt (every contender ran on it) the bench writes
`<out>.partial` (pickle, written atomically, between prompts, outside every timed call):

    fingerprint      what the numbers depend on (model, dtype, prompts, methods, sampling, budget
                     curve source, threads, the digest of the measuring code and the torch /
                     transformers versions); a resume with another fingerprint is refused,
                     naming the fields that differ
    latency_table    the curve budget=auto used (a resume reuses it, so the trees are the same)
    runs             every finished repeat: per prompt, per contender, the `Run` as a plain dict
                     (output ids, seconds, time split, steps, tree nodes), or None if it failed
    current          the same for the finished prompts of the repeat in progress
    errors           failed (repeat, prompt, contender)s so far
    drafter_states   each engine contender's `Drafter.run_state()` after the last finished prompt
                     (budget=auto's learnt acceptance rates, Token Recycling's table, ...), so
                     that a resumed run drafts exactly what an uninterrupted run would
    environments     per repeat, the processes that ran it: [{"first_prompt": i, "environment":
                     goose.harness.runner.environment()}, ...] (two or more where it was resumed)

What a resume cannot give back is the machine: prompts run by another process (or on another
machine) are timed there. Every contender runs on a prompt before the next prompt starts, so each
prompt's contenders are always measured side by side, in one process, and a repeat's ratio sums
such side-by-side measurements; the record lists which process ran which prompts
(`repeat_environments`), and tokens/s should only be compared within one environment. The
finished run deletes the checkpoint once its record is written. `python -m experiments.bench --out <out> --show-partial` prints the summary of the
repeats a checkpoint holds so far (it loads no model and leaves the checkpoint as it is), so a run
that spans several sessions can be read between them.

The code is pinned by content, not by commit (`measuring_code_digest`): a sha256 over the files the
timed path runs (goose/, baselines/, experiments/, conf/, run.py, pyproject.toml). Committing a
figure, a README or an analysis script beside a run in progress does not stop it from resuming,
and `<out>.partial` may itself be committed so that the next session (a new checkout) resumes it;
any edit to the measuring code is refused.
"""

from __future__ import annotations

import hashlib
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from goose.harness.run_state import dump_atomically

FORMAT = 3  # 1: checkpoints at repeat boundaries only; 2: pinned to the git commit
# argparse fields the measured numbers depend on (not --out, --repeats: a resume may ask for more).
FINGERPRINT_ARGS = (
    "model",
    "dtype",
    "benches",
    "data_dir",
    "limit",
    "chat_template",
    "max_new_tokens",
    "prepack",
    "compile",
    "methods",
    "hf",
    "threads",
    "latency",
    "calibration_repeats",
    "temperature",
    "top_p",
    "top_k",
    "seed",
)


# what the timed path runs: a change to any file under these (relative to the repository root)
# changes the digest a checkpoint is pinned to
MEASURING_CODE = ("goose", "baselines", "experiments", "conf", "run.py", "pyproject.toml")
MEASURING_SUFFIXES = (".py", ".yaml", ".toml")
REPO_ROOT = Path(__file__).resolve().parent.parent


def measuring_code_digest(root: Path = REPO_ROOT) -> str:
    """sha256 (first 16 hex digits) over the path and bytes of every .py / .yaml / .toml file
    under MEASURING_CODE in the working tree at `root`, committed or not."""
    files: list[Path] = []
    for name in MEASURING_CODE:
        top = root / name
        files += [top] if top.is_file() else sorted(top.rglob("*"))
    digest = hashlib.sha256()
    for f in files:
        if f.is_file() and f.suffix in MEASURING_SUFFIXES and "__pycache__" not in f.parts:
            digest.update(f.relative_to(root).as_posix().encode() + b"\0")
            digest.update(f.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


class CheckpointMismatch(ValueError):
    """A checkpoint written by a bench with other settings or code."""


@dataclass
class BenchCheckpoint:
    """The finished prompts and repeats of one bench invocation (see the module docstring)."""

    fingerprint: dict[str, Any]
    latency_table: dict[str, Any] | None = None
    runs: list[list[dict[str, Any]]] = field(default_factory=list)
    current: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, str]] = field(default_factory=list)
    drafter_states: dict[str, Any] = field(default_factory=dict)
    environments: list[list[dict[str, Any]]] = field(default_factory=list)

    @staticmethod
    def path_for(out: str | Path) -> Path:
        return Path(f"{out}.partial")

    @staticmethod
    def fingerprint_of(
        args: Any, prompt_keys: list[tuple[str, str]], code: str, versions: dict[str, str]
    ) -> dict[str, Any]:
        """The settings a resume must share with the run it continues: the bench's arguments,
        its prompts, the measuring code's digest (`measuring_code_digest`) and the library
        versions (goose.harness.runner.environment()["versions"])."""
        return {
            **{k: getattr(args, k) for k in FINGERPRINT_ARGS},
            "prompts": [list(k) for k in prompt_keys],
            "code": code,
            "versions": versions,
        }

    def save(self, path: Path) -> None:
        dump_atomically(path, {"format": FORMAT, **self.__dict__})

    @classmethod
    def read(cls, path: Path) -> BenchCheckpoint:
        """The checkpoint at `path`, whatever its fingerprint (to show its finished repeats);
        CheckpointMismatch if another version of this format wrote it."""
        with path.open("rb") as fh:
            saved = pickle.load(fh)
        if saved.pop("format", None) != FORMAT:
            raise CheckpointMismatch(f"{path} was written by another version of experiments/bench.py")
        return cls(**saved)

    @classmethod
    def load(cls, path: Path, fingerprint: dict[str, Any]) -> BenchCheckpoint:
        """The checkpoint at `path`; CheckpointMismatch if it was written with another fingerprint
        (or by another version of this format)."""
        ckpt = cls.read(path)
        differ = sorted(
            k
            for k in set(fingerprint) | set(ckpt.fingerprint)
            if fingerprint.get(k) != ckpt.fingerprint.get(k)
        )
        if differ:
            detail = "; ".join(
                f"{k}: checkpoint {_short(ckpt.fingerprint.get(k))} vs now {_short(fingerprint.get(k))}"
                for k in differ
            )
            raise CheckpointMismatch(
                f"{path} holds repeats of a bench with other settings ({detail}). "
                "Run with the same settings to resume it, or pass --fresh to discard it."
            )
        return ckpt


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."

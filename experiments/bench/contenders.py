"""The contenders of a bench run and how one runs a prompt: their names (engine:<method>[:auto][@verifier],
hf:<name>) and rows' method names, the `Setting` every row shares, an engine contender through the runner
(`run_cell`, one drafter per results file), engine AR's reference pass, and the order that rotates from
prompt to prompt."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from experiments.bench.load import BenchPrompt, method_factory
from goose.engine.core.drafter import ARDrafter, Drafter
from goose.engine.core.sampling import SamplingParams
from goose.engine.core.verifier import VerificationEngine
from goose.harness.cells import Cell, SamplingPlan
from goose.harness.runner import run_cell
from goose.records.results import cell_key, results_path

REFERENCE = "engine:ar"
REFERENCE_FOLDER = "reference"
HF_CONTENDERS = ("greedy", "pld")


def contender_names(methods: str, hf: str, greedy: bool) -> list[str]:
    """The contenders' names for comma-separated --methods and --hf, in the order they are built:
    engine:ar, the engine methods, the transformers ones (hf:greedy is hf:sample when sampling).
    ValueError names an unknown --hf contender and the valid ones."""
    names = [REFERENCE] + [f"engine:{m}" for m in methods.split(",") if m and m != "ar"]
    for h in [h for h in hf.split(",") if h]:
        if h not in HF_CONTENDERS:
            raise ValueError(f"unknown --hf contender {h!r}; choose from {', '.join(HF_CONTENDERS)}")
        names.append(hf_name(h, greedy))
    return list(dict.fromkeys(names))


def contender_verifier(contender: str) -> str:
    """The `sampling.verifier` of a contender: engine:stand_chain@block -> block; auto where none is named."""
    return contender.partition("@")[2] or "auto"


def check_contenders(
    contenders: Sequence[str], sampling: SamplingParams, overrides: dict[str, list[str]], *, model: str
) -> None:
    """Every engine contender's config composed as it will run, with `model`, before any model loads: its
    method's --method-overrides, and its `@verifier`, which must apply to the drafts at this temperature (the
    check `run.py` makes, goose.harness.compose.check_drafter_verifier). UserError names what is wrong."""
    for name in contenders:
        if not name.startswith("engine:"):
            continue
        method = row_method(name).removesuffix("_auto")
        verifier = contender_verifier(name)
        extra = list(overrides.get(method, ()))
        if verifier != "auto":
            extra += [
                f"sampling.verifier={verifier}",
                f"sampling.temperature={sampling.temperature}",
                f"sampling.top_p={sampling.top_p}",
                f"sampling.top_k={sampling.top_k}",
            ]
        if extra:
            method_factory(method, extra, model=model)


def hf_name(contender: str, greedy: bool) -> str:
    """The name of --hf `contender`: hf:greedy samples (hf:sample) at temperature > 0."""
    return f"hf:{'sample' if contender == 'greedy' and not greedy else contender}"


def row_method(contender: str) -> str:
    """The row's method of a contender: engine:goose:auto -> goose_auto, hf:pld -> hf_pld,
    engine:stand_chain@block -> stand_chain (the verifier is the row's `verifier`)."""
    kind, _, rest = contender.partition("@")[0].partition(":")
    if kind == "hf":
        return f"hf_{rest}"
    return rest.replace(":auto", "_auto")


@dataclass
class Setting:
    """What every contender's rows share: the engine, the model's label and dtype, the sampling,
    where the rows of each repeat go, the fields every row carries, the reference pass's AR rows by
    cell key (what each contender's output is checked against, whatever its position) and whether
    this run may add rows to files other code wrote."""

    engine: VerificationEngine
    tokenizer: Any
    model: str
    dtype: str
    max_new_tokens: int
    sampling: SamplingParams
    plan: SamplingPlan
    out: Path
    extra: dict[str, Any]
    references: dict[tuple, dict[str, Any]] = field(default_factory=dict)
    allow_mixed_code: bool = False

    def results_file(self, repeat: int, bench: str) -> Path:
        return results_path(self.out / f"repeat{repeat}", self.model, bench)

    def cell(self, bench: BenchPrompt, method: str, config: dict[str, Any], verifier: str = "auto") -> Cell:
        return Cell(
            self.model,
            bench.bench,
            method,
            config,
            self.max_new_tokens,
            self.dtype,
            chat_template=bench.chat_template,
            sampling=replace(self.sampling, verifier=verifier),
        )

    def fields(self, repeat: int, p: BenchPrompt) -> dict[str, Any]:
        return {**self.extra, "repeat": repeat, "bench_source": p.source}


Segment = tuple[int, list[BenchPrompt]]
"""(repeat, the prompts of one benchmark): the prompts of one results file, in the order they run."""


Contender = Callable[[Setting, Segment, int], dict[str, Any]]
"""(setting, the segment, index of the prompt to run) -> its row."""


def _quiet(_: str) -> None:
    """The runner's per-prompt lines: the bench draws its own progress bar."""


def engine_contender(method: str, make: Callable[[], Drafter], verifier: str = "auto") -> Contender:
    """`method` (a row's method name) through `run_cell`, its sampled drafts verified by `verifier`:
    a fresh drafter from `make` at the first prompt of each results file, the same one across the
    file's prompts. The runner gets the benchmark's prompts up to this one: those already in the
    results are reported, not re-run, and a drafter carrying state across prompts is restored from
    the runner's checkpoint after them (resume)."""
    config = make().config()
    current: list[Drafter] = []  # the drafter of the results file being run

    def run(setting: Setting, segment: Segment, i: int) -> dict[str, Any]:
        repeat, prompts = segment
        p = prompts[i]
        cell = setting.cell(p, method, config, verifier)
        if i == 0 or not current:
            current[:] = [make()]
        drafter = current[0]
        rows = run_cell(
            setting.engine,
            setting.tokenizer,
            [q.prompt for q in prompts[: i + 1]],
            cell,
            lambda: drafter,
            setting.results_file(repeat, p.bench),
            extra=setting.fields(repeat, p),
            log=_quiet,
            progress=False,
            plan=setting.plan,
            references=setting.references,
            allow_mixed_code=setting.allow_mixed_code,
        )
        return next(
            r
            for r in rows
            if r["method"] == method
            and r.get("verifier", "auto") == verifier
            and str(r["prompt_id"]) == p.prompt_id
        )

    return run


def rotated(names: Sequence[str], shift: int) -> list[str]:
    """The contenders in the order they run on a prompt: `names` rotated left by `shift`, engine AR
    included, so that over a run every contender (the reference of every ratio too) runs at every
    position about equally often and drifts of the machine's speed hit all alike."""
    k = shift % max(1, len(names))
    return [*names[k:], *names[:k]]


def reference_pass(setting: Setting, by_bench: list[list[BenchPrompt]]) -> dict[tuple, dict[str, Any]]:
    """Engine AR once on every prompt before the timed rounds: the output each contender's is checked
    against (near-tie verdicts included) whatever its position in a round, so that engine AR rotates
    like the others. Rows go to <out>/reference/ with `repeat` None: no table times them. Returns them
    by cell key (resumed like any cell)."""
    references: dict[tuple, dict[str, Any]] = {}
    for bench_prompts in by_bench:
        first = bench_prompts[0]
        rows = run_cell(
            setting.engine,
            setting.tokenizer,
            [q.prompt for q in bench_prompts],
            setting.cell(first, "ar", ARDrafter().config()),
            ARDrafter,
            results_path(setting.out / REFERENCE_FOLDER, setting.model, first.bench),
            extra={**setting.extra, "repeat": None, "bench_source": first.source, "reference_pass": True},
            log=_quiet,
            progress=False,
            plan=setting.plan,
            allow_mixed_code=setting.allow_mixed_code,
        )
        references |= {cell_key(r): r for r in rows if r.get("status") == "ok"}
    return references

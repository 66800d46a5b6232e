"""Wall-clock benchmark (`make bench`): every contender measured side by side in one process, on the
same prompts, on the same machine, through the runner that `run.py` uses, into result rows.

Contenders
    engine:ar           the shared engine with a one-node tree per step (method `ar`)
    engine:<method>     any configured method (conf/method/<method>.yaml), at its configured budget
    engine:<method>:auto   the same method at budget=auto (row method `<method>_auto`), the latency
                        curve set up as `run.py budget=auto` does it (goose.harness.job.auto_budget)
    engine:<method>@<verifier>   at T > 0, a drafter whose drafts carry q verified by `sampling.verifier`
                        = <verifier> (rows: method `<method>`, verifier `<verifier>`), refused before
                        the model loads where the verifier does not apply (goose.engine.core.verify.rules)
    hf:greedy           transformers `generate(do_sample=False)` (row method `hf_greedy`; at T > 0
                        `generate(do_sample=True)`, `hf:sample` / `hf_sample`)
    hf:pld              transformers `generate(prompt_lookup_num_tokens=10)` (row method `hf_pld`)

Every engine contender runs through `goose.harness.runner.run_cell`, one prompt at a time; the
transformers contenders through `hf_contender`, a small adapter that times `generate` and appends
a row of the same fields through the same `append_row` (it has no drafter to plug into the
engine). Rows go to `<out>/repeat<k>/<model>/<bench>.jsonl`, one folder per repeat (a row's key
has no repeat: a repeat is a re-run of the same cells), each row carrying `experiment`
("bench:<out folder name>"), `repeat` and `bench_protocol` (the arguments and contenders).

Protocol: warm-up first (every contender once on a short prompt, untimed, with throw-away
drafters); then a reference pass (engine AR once on every prompt, rows in <out>/reference/ that no
table times: the output each contender's is checked against, near-tie verdicts included, as in any
`run.py` cell); then `--repeats` rounds, each running every contender on every prompt, prompt by
prompt, in an order that rotates from prompt to prompt with engine AR among them, so that drifts of
the machine's speed, and the cost of running first, hit all contenders alike. A run's rows are of
one code state (`goose.records.code_state`): resuming <out> with rows of other code refuses unless
`--allow-mixed-code`, which every row then records; at the end the rows are sealed (.jsonl.xz). One drafter object per
contender lives across the prompts of one results file (a repeat's benchmark), as in a `run.py` cell,
and every file starts from a fresh one: a repeat re-runs the same prompts, and a drafter that kept what
it learnt from them (a run-long table, learnt rates) would speculate on texts it has already seen,
which no repeat of a real workload does. Tokens/s of a contender in a round =
its generated tokens / its wall seconds over the prompts every contender completed (prefill
included); `make figures` turns the rows into the wall-clock tables (analysis/wall_clock.py) and
this script prints the same summary at the end.

Resume is the runner's: the same command skips every (repeat, prompt, contender) whose row is
already in <out> and restores drafters' cross-prompt state from the runner's checkpoints;
budget=auto reuses the curve saved in <out>/budget_latency.json, so a resumed run drafts the same
trees. `--fresh` deletes <out> first; `--show-partial` prints the summary of the rows so far.

Sampling (`--temperature T`, `--top-p`, `--top-k`, `--seed`): every contender samples with the
same settings and the runner's seeds (`SamplingPlan(seed)`: one sample per prompt).
`--method-overrides FILE` applies Hydra overrides to a method's contenders, e.g. the delayed tree's
(K, L1, L2) that experiments.delayed_grid chose for the setting (its chosen.json).

    python -m experiments.bench --threads 2 --dtype bfloat16 --out results/runs/bench/bfloat16
    python -m experiments.bench --benches spec_bench --per-category 10 --chat-template auto \
        --methods pld,tr,suffix,logitspec,hierarchy,source_select,goose     # the Spec-Bench table
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass, field, replace  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402
from tqdm import tqdm  # noqa: E402

from analysis.spec_bench_table import BENCH as SPEC_BENCH  # noqa: E402
from analysis.spec_bench_table import per_category_sample  # noqa: E402
from analysis.wall_clock import contender_name, print_record, record_from_rows  # noqa: E402
from goose.engine.budget.cost_model import LatencyTable  # noqa: E402
from goose.engine.budget.hardware_limit import measure_floor  # noqa: E402
from goose.engine.core.decode import generate  # noqa: E402
from goose.engine.core.drafter import ARDrafter, Drafter  # noqa: E402
from goose.engine.core.sampling import SamplingParams, derive_seed  # noqa: E402
from goose.engine.core.verifier import VerificationEngine, sync_clock  # noqa: E402
from goose.harness.benchmarks import PAPER_BENCHMARKS  # noqa: E402
from goose.harness.chat import encode_prompt  # noqa: E402
from goose.harness.compose import (  # noqa: E402
    UserError,
    benchmark_prompts,
    chat_template_decision,
    compose_config,
    drafter_factory,
    load_engine,
    release_engines,
)
from goose.harness.job import auto_budget  # noqa: E402
from goose.harness.models import LoadedModel  # noqa: E402
from goose.harness.runner import Cell, SamplingPlan, environment, run_cell  # noqa: E402
from goose.records.code_state import MixedCodeError, check_one_code_state, code_state  # noqa: E402
from goose.records.degenerate import degenerate_fields  # noqa: E402
from goose.records.provenance import chat_template_fields, prompt_fields, seed_fields  # noqa: E402
from goose.records.results import append_row, cell_key, read_rows, results_path  # noqa: E402
from goose.records.seal import seal_tree  # noqa: E402
from goose.validation import check_int_list  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = "engine:ar"
REFERENCE_FOLDER = "reference"
LATENCY_FILE = "budget_latency.json"
HF_CONTENDERS = ("greedy", "pld")
HF_KWARGS = {"greedy": {}, "pld": {"prompt_lookup_num_tokens": 10}}


# ------------------------------------------------------------------------------------ loading
def method_factory(name: str, overrides: Sequence[str] = (), *, model: str) -> Callable[[], Drafter]:
    """A factory of the drafter of conf/method/<name>.yaml (validated), composed with conf/model/<model>.yaml:
    a method's config may interpolate the model's (REST's `datastore: mbpp_nontest.${model.name}`), and
    one composed without it would get the default model's values, another tokenizer's datastore."""
    return drafter_factory(compose_config([f"model={model}", f"method={name}", *overrides]))


def model_and_engine(
    name: str, dtype: str | None = None, prepack: str = "auto", compile_forward: bool = False
) -> tuple[LoadedModel, VerificationEngine]:
    """conf/model/<name>.yaml, optionally in another dtype, and its warmed-up engine with the
    config's `prepack` and `compile` settings, through the harness's loader (the one `run.py`
    uses)."""
    release_engines()  # one model in memory at a time
    overrides = [f"model={name}", f"prepack={prepack}", f"compile={str(compile_forward).lower()}"]
    overrides += [f"model.dtype={dtype}"] if dtype else []
    return load_engine(compose_config(overrides))


@dataclass
class BenchPrompt:
    """One prompt as the runner takes it (`prompt`: prompt_id, text), with its tokens."""

    bench: str
    prompt: Any
    ids: list[int]
    chat_template: bool
    source: str

    @property
    def prompt_id(self) -> str:
        return str(self.prompt.prompt_id)


def load_prompts(
    tokenizer: Any,
    model: str,
    benches: list[str],
    limit: int,
    data_dir: str | None,
    chat_template: str,
    per_category: int | None = None,
) -> list[BenchPrompt]:
    """The first `limit` prompts of each benchmark, composed and tokenized as run.py does it
    (goose.harness.compose), with bench.chat_template = `chat_template` (auto | true | false); for
    spec_bench with `per_category`, that many of each Spec-Bench category instead (per_category_sample)."""
    out = []
    for bench in benches:
        cfg = compose_config(
            [f"model={model}", f"bench={bench}", f"bench.chat_template={chat_template}"]
            + ([f"data_dir={data_dir}"] if data_dir else [])
        )
        by_category = per_category is not None and bench == SPEC_BENCH
        spec, prompts, source = benchmark_prompts(cfg, None if by_category else limit)
        if by_category:
            prompts = per_category_sample(prompts, per_category)
        apply_chat, _ = chat_template_decision(cfg, spec, tokenizer)
        out += [
            BenchPrompt(bench, p, encode_prompt(tokenizer, p.text, apply_chat), apply_chat, source)
            for p in prompts
        ]
    return out


# ------------------------------------------------------------------------------------ contenders
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


def _sequence_seed(plan: SamplingPlan, sampling: SamplingParams, prompt_id: str) -> tuple[int | None, int]:
    """(sample_seed, sequence seed) of a prompt's one sample, as the runner derives them."""
    sample_seed = plan.samples(sampling)[0][1]
    return sample_seed, 0 if sample_seed is None else derive_seed(sample_seed, str(prompt_id))


def hf_contender(model: Any, eos: list[int], method: str, **generate_kwargs: Any) -> Contender:
    """transformers' `generate` as a contender: timed from before the call to after it
    (CUDA-synchronised); at temperature > 0 it samples (do_sample, the same temperature / top_p /
    top_k; torch's global seed set from the prompt's sequence seed, outside the timed region). Its
    row has the runner's cell fields, provenance and `output_ids` / `wall_time_s` /
    `generated_tokens`, compared with engine AR's row of the same prompt and repeat (the verdict
    on a divergence is the runner's `lossless_fields`); a row already in the file is returned
    without running (resume by the same cell key)."""
    config = {"library": "transformers", **generate_kwargs}

    def run(setting: Setting, segment: Segment, i: int) -> dict[str, Any]:
        repeat, prompts = segment
        p = prompts[i]
        cell = setting.cell(p, method, config)
        path = setting.results_file(repeat, p.bench)
        sample_seed, seed = _sequence_seed(setting.plan, setting.sampling, p.prompt_id)
        sample = {"prompt_id": p.prompt.prompt_id, "sample_seed": sample_seed}
        on_disk = {cell_key(r): r for r in read_rows(path) if r.get("status") == "ok"}
        if (key := cell_key({**cell.row_base(), **sample})) in on_disk:
            return on_disk[key]
        ar_key = cell_key({**setting.cell(p, "ar", {}).row_base(), **sample})
        reference = on_disk.get(ar_key) or setting.references.get(ar_key)
        sampling = setting.sampling
        kwargs = dict(generate_kwargs)
        if sampling.greedy:
            kwargs["do_sample"] = False
        else:
            kwargs |= {"do_sample": True, "temperature": sampling.temperature, "top_p": sampling.top_p}
            kwargs["top_k"] = sampling.top_k or None
        row: dict[str, Any] = {
            **cell.row_base(),
            **sample,
            "sample_idx": None if sample_seed is None else 0,
            "prompt_tokens": len(p.ids),
            **prompt_fields(getattr(p.prompt, "text", None), p.ids),
            **seed_fields(setting.plan.seed, sample_seed, seed),
            **environment(),
            **setting.fields(repeat, p),
            **chat_template_fields(setting.tokenizer, p.chat_template),
            "timestamp": time.time(),
        }
        try:
            out = _generate(model, p.ids, setting.max_new_tokens, eos, seed, kwargs)
            row |= {"generated_tokens": len(out[0]), "wall_time_s": out[1], "output_ids": out[0]}
            row["tokens_per_s"] = len(out[0]) / out[1] if out[1] else 0.0
            row |= degenerate_fields(row)
            row |= _lossless(setting, p, out[0], reference, seed)
            row["status"] = "ok"
        except (RuntimeError, ValueError) as exc:  # a failed prompt is recorded, not fatal
            row |= {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
        append_row(path, row)
        return row

    return run


def _generate(
    model: Any, ids: list[int], max_new: int, eos: list[int], seed: int, kwargs: dict[str, Any]
) -> tuple[list[int], float]:
    x = torch.tensor([ids], device=model.device)
    torch.manual_seed(seed)
    t0 = sync_clock(model.device)
    out = model.generate(
        x,
        attention_mask=torch.ones_like(x),
        max_new_tokens=max_new,
        eos_token_id=eos,
        pad_token_id=eos[0],
        **kwargs,
    )
    t1 = sync_clock(model.device)
    return out[0, len(ids) :].tolist(), t1 - t0


def _lossless(
    setting: Setting, p: BenchPrompt, output: list[int], reference: dict[str, Any] | None, seed: int
) -> dict[str, Any]:
    """The runner's comparison with engine AR's row (greedy: the near-tie verdict at the first
    differing token; sampled: transformers draws other noise, so only `same_as_ar`)."""
    none = {"lossless": None, "first_diff": None, "diff_margin": None, "near_tie": None}
    if reference is None:
        return none | {"lossless_error": "no engine AR row for this prompt"}
    if not setting.sampling.greedy:
        return none | {"lossless_check": "distribution", "same_as_ar": output == reference["output_ids"]}
    from goose.harness.runner import lossless_fields

    return lossless_fields(setting.engine, p.ids, output, reference["output_ids"], setting.sampling, seed)


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


# ------------------------------------------------------------------------------------ driver
def kv_lens_arg(text: str) -> list[int]:
    """--latency-kv 1024[,2048]: the config's budget_kv_lens, checked as run.py checks it."""
    try:
        lens = [int(k) for k in text.split(",") if k]
        return lens and list(
            check_int_list("--latency-kv", lens, low=1, distinct=False, why="cache lengths, e.g. 1024")
        )
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m", help="conf/model/<name>.yaml")
    ap.add_argument(
        "--dtype", default=None, choices=("float32", "bfloat16", "float16"), help="override the model's dtype"
    )
    ap.add_argument("--benches", default=",".join(PAPER_BENCHMARKS), help="comma-separated benchmark names")
    ap.add_argument(
        "--data-dir", default=str(ROOT.parent / "shared" / "data"), help="files for mbpp / classeval"
    )
    ap.add_argument("--limit", type=int, default=20, help="prompts per benchmark")
    ap.add_argument(
        "--per-category",
        type=int,
        default=None,
        help="spec_bench: N prompts of each of its 6 categories, spread over each (instead of --limit)",
    )
    ap.add_argument(
        "--chat-template",
        default="false",
        choices=("auto", "true", "false"),
        help="bench.chat_template (default false: raw prompts, as in the paper presets)",
    )
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument(
        "--prepack",
        default="auto",
        choices=("auto", "true", "false"),
        help="the engine's prepack setting (false: the plain F.linear lean forward, the fallback)",
    )
    ap.add_argument(
        "--compile",
        action="store_true",
        help="the engine's compile setting: the verification steps' lean forward through torch.compile",
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--methods", default="goose,goose:auto", help="engine methods besides AR; suffix :auto = budget=auto"
    )
    ap.add_argument(
        "--latency-kv",
        type=kv_lens_arg,
        default=[],
        help="budget_kv_lens: more cache lengths for :auto's cost curve, t(n, kv) (e.g. 1024; default: KV 256 only)",
    )
    ap.add_argument(
        "--in-run-cost",
        action="store_true",
        help="budget_in_run_cost: :auto's cost curve corrected by each contender's measured steps",
    )
    ap.add_argument("--hf", default="greedy,pld", help="transformers contenders: greedy, pld")
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    ap.add_argument(
        "--latency", default=None, help="latency table JSON for :auto (budget_profile; default: calibrate)"
    )
    ap.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (0 = greedy)")
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--top-k", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0, help="the sampling group's seed")
    ap.add_argument(
        "--method-overrides",
        default=None,
        help="JSON file {method: [Hydra overrides] or {overrides: [...]}} applied to that method's "
        "contenders (e.g. the delayed tree's shape chosen by experiments.delayed_grid: its chosen.json)",
    )
    ap.add_argument(
        "--out",
        default=None,
        help="where the rows go (<out>/repeat<k>/<model>/<bench>.jsonl); default "
        "results/runs/bench/<model>[_<dtype>]",
    )
    ap.add_argument("--fresh", action="store_true", help="delete <out> first instead of resuming it")
    ap.add_argument(
        "--allow-mixed-code",
        action="store_true",
        help="resume <out> although rows of other code (another commit, other local changes) are in it; "
        "every row written records it and the tables list the code states",
    )
    ap.add_argument(
        "--show-partial",
        action="store_true",
        help="print the summary of the rows in <out> so far and exit: runs nothing, loads no model",
    )
    args = ap.parse_args(argv)
    if (
        args.repeats < 1
        or args.limit < 1
        or args.max_new_tokens < 1
        or (args.per_category is not None and args.per_category < 1)
    ):
        ap.error("--repeats, --limit, --per-category and --max-new-tokens must be >= 1")
    try:
        args.sampling = SamplingParams(args.temperature, args.top_p, args.top_k)
    except ValueError as exc:
        ap.error(str(exc).replace("sampling.", "--").replace("_", "-"))
    try:
        args.contenders = contender_names(args.methods, args.hf, args.sampling.greedy)
        args.overrides = read_method_overrides(args.method_overrides)
        check_contenders(args.contenders, args.sampling, args.overrides, model=args.model)
    except (ValueError, UserError) as exc:
        ap.error(str(exc))
    args.out = Path(
        args.out or ROOT / "results" / "runs" / "bench" / "_".join(filter(None, [args.model, args.dtype]))
    )
    return args


def read_method_overrides(path: str | None) -> dict[str, list[str]]:
    """{method: Hydra overrides} from `path` (see --method-overrides); `check_contenders` composes them."""
    if path is None:
        return {}
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"--method-overrides {path}: {exc}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"--method-overrides {path}: a JSON object {{method: [overrides]}}")
    table = {m: v["overrides"] if isinstance(v, dict) else v for m, v in raw.items()}
    for method, overrides in table.items():
        if not (isinstance(overrides, list) and all(isinstance(o, str) for o in overrides)):
            raise ValueError(
                f"--method-overrides {path}: {method}: a list of Hydra overrides, got {overrides!r}"
            )
    return table


def show_partial(out: Path) -> dict[str, Any]:
    """Print and return the summary of the rows in `out` so far (runs nothing)."""
    rows = read_rows(out) if out.is_dir() else []
    if not rows:
        raise SystemExit(f"experiments.bench: no rows to show in {out}")
    record = record_from_rows(rows, out.name) | {"source": str(out)}
    print_record(record, out.name)
    return record


def row_method(contender: str) -> str:
    """The row's method of a contender: engine:goose:auto -> goose_auto, hf:pld -> hf_pld,
    engine:stand_chain@block -> stand_chain (the verifier is the row's `verifier`)."""
    kind, _, rest = contender.partition("@")[0].partition(":")
    if kind == "hf":
        return f"hf_{rest}"
    return rest.replace(":auto", "_auto")


Warm = Callable[[list[int]], object]
"""An untimed, unrecorded run of a contender's code path on a short prompt."""


def build_contenders(
    args: argparse.Namespace, loaded: LoadedModel, engine: VerificationEngine
) -> tuple[dict[str, Contender], dict[str, Warm], dict[str, Any] | None]:
    """(the measured contenders, their warm-ups with throw-away drafters, the budget=auto curve as
    recorded in each row). budget=auto is set up as `run.py` does it (`goose.harness.job.auto_budget`),
    from --latency, else from the curve an earlier run of this bench saved in <out>, else
    calibrated now and saved there."""
    saved = args.out / LATENCY_FILE
    profile = args.latency or (str(saved) if saved.is_file() else None)
    latency_record = None
    measured: dict[str, Contender] = {}
    warm: dict[str, Warm] = {}
    model, eos = loaded.model, list(loaded.eos_token_ids)
    for name in args.contenders:
        method = row_method(name)
        if name.startswith("hf:"):
            kwargs = HF_KWARGS["greedy" if name == "hf:sample" else name.removeprefix("hf:")]
            measured[name] = hf_contender(model, eos, method, **kwargs)
            warm[name] = lambda ids, kw=kwargs: _generate(model, ids, 16, eos, 0, {"do_sample": False, **kw})
            continue
        verifier = contender_verifier(name)
        base = method.removesuffix("_auto")
        make = method_factory(base, args.overrides.get(base, ()), model=args.model)
        if method.endswith("_auto"):
            make, latency_record = auto_budget(make, engine, profile, args.latency_kv, args.in_run_cost)
            if profile is None:  # a resume drafts with the same curve
                saved.parent.mkdir(parents=True, exist_ok=True)
                LatencyTable.from_dict(latency_record).save(saved)
                profile = str(saved)
        measured[name] = engine_contender(method, make, verifier)
        sampling = replace(args.sampling, verifier=verifier)
        warm[name] = lambda ids, make=make, sampling=sampling: generate(
            engine, make(), ids, 16, sampling=sampling
        )
    return measured, warm, latency_record


def hardware_floor(engine: VerificationEngine, rows: list[dict[str, Any]], max_new: int) -> dict[str, Any]:
    """Each engine contender's mean verification forward per step (repeat 0) against its floor
    (goose.engine.budget.hardware_limit: weight + KV bytes at the measured bandwidth, or FLOPs at
    the measured matmul throughput) for its mean tree size after the mean KV length of a step.
    Measured after the timed rounds; written to <out>/hardware_floor.json."""
    floor = measure_floor(engine.model)
    first = [r for r in rows if r.get("repeat") == 0 and r.get("status") == "ok" and "forward_s" in r]
    if not first:
        return {}
    kv_len = round(sum(r["prompt_tokens"] for r in first) / len(first) + max_new / 2)
    out: dict[str, Any] = {"floor": floor.as_dict(), "mean_kv_len": kv_len, "contenders": {}}
    for method, verifier in dict.fromkeys((r["method"], r.get("verifier", "auto")) for r in first):
        mine = [r for r in first if r["method"] == method and r.get("verifier", "auto") == verifier]
        steps = sum(len(r.get("step_tree_size") or []) for r in mine)
        if not steps:
            continue
        step = sum(r["forward_s"] for r in mine) / steps
        nodes = sum(sum(r["step_tree_size"]) for r in mine) / steps
        bound = floor.seconds(max(1, round(nodes)), kv_len)
        out["contenders"][contender_name(method, verifier)] = {
            "mean_tree_nodes": nodes,
            "forward_ms": 1e3 * step,
            "floor_ms": 1e3 * bound,
            "times_floor": step / bound,
            "bound_by": floor.bound(max(1, round(nodes)), kv_len),
        }
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    out: Path = args.out
    if args.show_partial:
        return show_partial(out)
    if args.fresh and out.exists():
        shutil.rmtree(out)
    try:  # before any model loads: one code state per run unless mixing is asked for
        check_one_code_state(
            read_rows(out) if out.is_dir() else [], code_state(), str(out), args.allow_mixed_code
        )
    except MixedCodeError as exc:
        raise SystemExit(f"experiments.bench: {exc}") from None
    if args.threads:
        torch.set_num_threads(args.threads)
    loaded, engine = model_and_engine(args.model, args.dtype, args.prepack, args.compile)
    benches = [b for b in args.benches.split(",") if b]
    prompts = load_prompts(
        loaded.tokenizer,
        args.model,
        benches,
        args.limit,
        args.data_dir,
        args.chat_template,
        args.per_category,
    )
    measured, warm, latency_record = build_contenders(args, loaded, engine)
    names = list(measured)
    provenance = dict(loaded.provenance)
    model_label = provenance.pop("model_label", args.model)
    skip = ("sampling", "out", "fresh", "show_partial", "allow_mixed_code")
    protocol = {k: v for k, v in vars(args).items() if k not in skip}
    extra = {
        **({"allow_mixed_code": True} if args.allow_mixed_code else {}),
        "experiment": f"bench:{out.name}",
        "bench_protocol": protocol | {"threads": torch.get_num_threads()},
        "forward": engine.forward_name,
        **({"budget_latency": latency_record} if latency_record else {}),
        **provenance,
    }
    setting = Setting(
        engine,
        loaded.tokenizer,
        model_label,
        str(loaded.dtype).replace("torch.", ""),
        args.max_new_tokens,
        args.sampling,
        SamplingPlan(args.seed),
        out,
        extra,
        allow_mixed_code=args.allow_mixed_code,
    )
    for fn in warm.values():  # untimed warm-up of every code path, nothing recorded
        fn(prompts[0].ids[:64])
    by_bench = [bench_prompts for b in benches if (bench_prompts := [p for p in prompts if p.bench == b])]
    setting.references = reference_pass(setting, by_bench)
    for rep in range(args.repeats):
        t_rep = time.perf_counter()
        bar = tqdm(total=len(prompts), desc=f"repeat {rep + 1}/{args.repeats}", unit="prompt", mininterval=30)
        k = 0
        for bench_prompts in by_bench:
            segment: Segment = (rep, bench_prompts)
            for i in range(len(bench_prompts)):
                for name in rotated(names, k + rep):
                    measured[name](setting, segment, i)
                k += 1
                bar.update()  # between prompts, outside every timed call
        bar.close()
        print(f"repeat {rep + 1}/{args.repeats}: {time.perf_counter() - t_rep:.0f} s")
    seal_tree(out)
    rows = read_rows(out)
    floor = hardware_floor(engine, rows, args.max_new_tokens)
    if floor:
        (out / "hardware_floor.json").write_text(json.dumps(floor, indent=1))
    record = record_from_rows(rows, out.name, floor) | {"source": str(out)}
    print_record(record, out.name)
    print(f"\nrows in {out}; `make figures` writes the wall-clock tables from them")
    return record


if __name__ == "__main__":
    main()

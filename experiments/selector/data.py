"""Training data for stand_select's trained selector (arXiv 2602.16994 §5: roots logged offline, each
action's block efficiency estimated without verification noise).

A sampled run of `stand_select` (the online selector steering, as deployed) on each prompt; every `--every`
steps, before the step drafts, the root's features (baselines.stand_select.features) and, for each trunk
length L1 of the grid, one draft of the largest tree at that L1 (K = max_paths, L2 = max_path_len; a random
stream of its own, so the run itself is not changed) scored by the target without committing
(`VerificationEngine.score`), then the verifier's exact E[accepted] on every smaller action the draft
contains (baselines.stand_select.actions). One JSON line per root into `--out` (`<name>.jsonl`, sealed as
`<name>.jsonl.xz` when the run ends; the same command resumes, skipping the prompts already logged, and
refuses a file of another code state or other settings):

    python -m experiments.selector.data --model smollm2-135m --temperature 1.0 --verifier rrs \
        --benches humaneval,gsm8k,mtbench --skip 20 --limit 20 --out results/studies/selector/roots/smollm2-135m-rrs-T1.0.jsonl

The prompts are taken after `--skip` per benchmark, so that the matched evaluation's first prompts stay held
out of the training data.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

import torch

from baselines.stand_select.actions import action_values, contained
from baselines.stand_select.drafter import StandSelectDrafter
from baselines.stand_select.features import root_features
from experiments.bench.load import model_and_engine, prompts_past
from goose.engine.core.decode import generate
from goose.engine.core.sampling import SamplingParams, derive_seed
from goose.engine.core.verifier import VerificationEngine
from goose.engine.core.verify.rules import VERIFIERS
from goose.records.code_state import code_state
from goose.records.results import append_line, read_rows
from goose.records.seal import seal

ROOT = Path(__file__).resolve().parents[2]


class LoggingSelect(StandSelectDrafter):
    """stand_select that, every `every` steps, logs the root's features and the exact value of every action
    (one scored draft per trunk length) before drafting its own tree."""

    def __init__(self, engine: VerificationEngine, every: int, verifier: str, **hyperparameters: Any) -> None:
        super().__init__(**hyperparameters)
        self.engine, self.every, self.verifier = engine, every, verifier
        self.roots: list[dict[str, Any]] = []
        self._log_rng = random.Random(0)
        self._prompt_step = 0

    def set_sampling(self, sampling, seed: int) -> None:
        super().set_sampling(sampling, seed)
        self._log_rng = random.Random(derive_seed(seed, "selector-data"))

    def begin(self, prompt_ids: list[int], prefill_logits: torch.Tensor) -> None:
        super().begin(prompt_ids, prefill_logits)
        self._prompt_step = 0

    def propose(self, committed: list[int]):
        if self._prompt_step % self.every == 0:
            self._log_root(committed)
        self._prompt_step += 1
        return super().propose(committed)

    def _log_root(self, committed: list[int]) -> None:
        s = self.sampling
        tail = committed[-self.max_order :]
        found = self._proposal_at(tail)
        features = root_features(found[1] if found else None, self._last, s.temperature, s.top_p)
        values: dict[str, float] = {}
        own_rng, own_counts = self._rng, dict(self.stats)
        self._rng = self._log_rng
        try:
            for largest in self._explore:
                self.cfg = self._cfgs[largest]
                tree = self._build_paths(tail)
                actions = contained(largest, self.grid)
                if len(tree) == 1 or tree.proposals is None:
                    values.update({a.label(): 0.0 for a in actions})  # nothing drafted: nothing accepted
                    continue
                view = self.engine.score(tree).view
                values.update(
                    {a.label(): v for a, v in action_values(view, largest, actions, self.verifier).items()}
                )
        finally:
            self._rng, self.cfg = own_rng, self._base
            self.stats.clear()
            self.stats.update(own_counts)
        self.roots.append({"step": self._prompt_step, "features": features, "values": values})


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m", help="conf/model/<name>.yaml")
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
    ap.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (> 0)")
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument(
        "--verifier", default="traversal", choices=[v for v in VERIFIERS if v not in ("auto", "block")]
    )
    ap.add_argument("--benches", default="humaneval,gsm8k,mtbench")
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--skip", type=int, default=20, help="prompts of each benchmark left to the evaluation")
    ap.add_argument("--limit", type=int, default=20, help="prompts per benchmark after --skip")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--every", type=int, default=4, help="log a root every this many steps")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument(
        "--out", required=True, help="a .jsonl file of roots (sealed as .jsonl.xz when the run ends)"
    )
    args = ap.parse_args(argv)
    if args.temperature <= 0:
        ap.error(f"--temperature = {args.temperature}: the selector picks sampled drafts; use T > 0")
    if not 0 < args.top_p <= 1:
        ap.error(f"--top-p = {args.top_p}: must be in (0, 1]")
    if args.skip < 0 or args.limit < 1 or args.max_new_tokens < 1 or args.every < 1:
        ap.error("--skip must be >= 0; --limit, --max-new-tokens and --every >= 1")
    return args


def main(argv: list[str] | None = None) -> Path:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    loaded, engine = model_and_engine(args.model, args.dtype)
    benches = [b for b in args.benches.split(",") if b]
    prompts = prompts_past(loaded.tokenizer, args.model, benches, args.skip, args.limit, args.data_dir)
    sampling = SamplingParams(args.temperature, top_p=args.top_p, verifier=args.verifier)
    drafter = LoggingSelect(engine, args.every, args.verifier)
    meta = {
        "model": args.model,
        "dtype": args.dtype,
        "temperature": args.temperature,
        "top_p": args.top_p,
        "verifier": args.verifier,
        "max_new_tokens": args.max_new_tokens,
        "code_state": code_state(),
    }
    out = Path(args.out)
    if out.suffix != ".jsonl":
        raise SystemExit(f"--out = {out}: a .jsonl file (sealed as .jsonl.xz when the run ends)")
    out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    for row in read_rows(out, migrate=False):
        if {k: row.get(k) for k in meta} != meta:
            raise SystemExit(
                f"{out} holds roots of other settings or code ({row.get('code_state')}, T {row.get('temperature')}, "
                f"{row.get('verifier')}): write to another file"
            )
        done.add((row["bench"], row["prompt_id"]))
    for k, p in enumerate(prompts):
        if (p.bench, p.prompt_id) in done:
            continue
        drafter.roots = []
        seed = derive_seed(args.seed, p.bench, p.prompt_id)
        generate(engine, drafter, p.ids, args.max_new_tokens, sampling=sampling, seed=seed)
        lines = [
            json.dumps({**meta, "bench": p.bench, "prompt_id": p.prompt_id, **root}) + "\n"
            for root in drafter.roots
        ]
        append_line(
            out, "".join(lines).encode()
        )  # one prompt's roots in one append: a resume never splits one
        print(f"prompt {k + 1}/{len(prompts)} ({p.bench}/{p.prompt_id}): {len(drafter.roots)} roots")
    seal(out)
    return out


if __name__ == "__main__":
    main()

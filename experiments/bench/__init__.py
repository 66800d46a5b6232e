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
the driver prints a short summary of them at the end (goose.records.bench_run).

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

Modules: `cli` (the arguments), `load` (the model, the engine, the prompts and the drafters, composed as
run.py composes them), `contenders` (the contenders' names, the runner's cells, engine AR's reference pass,
the rotation), `hf` (transformers' `generate` as a contender), `driver` (the warm-up, the rounds, the
summary); `python -m experiments.bench` runs `driver.main`.
"""

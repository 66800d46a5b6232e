"""The held-out protocol (`make heldout`, issue 56): speculation judged on workloads not used to design the
methods, beside the canonical `make bench`. It judges the non-degradation claim: hw_tree at budget=auto
≥ 1.0× the best single source (per repeat the faster of SuffixDecoding at budget=auto and PLD), and every
budget=auto contender ≥ 0.98× engine AR, in every category and benchmark (goose.records.heldout).

Two workloads, on one model and dtype, into one folder (default results/heldout/<model>-<dtype>/):

spec_bench   Spec-Bench's questions in the model's chat template (`--chat-template auto`: a base model's
             instruction format), N of each value of question.jsonl's `category` field (writing, roleplay,
             reasoning, math, coding, extraction, stem, humanities, translation, summarization, qa,
             math_reasoning, rag; `--per-category`, default 3, spread over each), through `make bench`'s own
             machinery (`python -m experiments.bench --benches spec_bench --categories ...`): one process,
             every contender side by side, ≥ 3 interleaved repeats with every contender's place rotated.
             Rows in <out>/spec_bench/. Writing and roleplay are MT-Bench's questions 81-100, the canonical
             protocol's mtbench prompts; the tables mark them.
fresh        Short runs as a new user makes them: for each benchmark (HumanEval, GSM8K, MT-Bench), each
             contender in its own fresh `python run.py method=<m> budget=auto|fixed bench=<b>
             bench.limit=6 max_new_tokens=128 ...` process (model load, budget=auto's curve set up at
             start-up as run.py sets it up, warm-up and all), in ≥ 3 rounds; round r runs the
             contenders in an order rotated by r · (benchmarks) + the benchmark's index. Rows in <out>/fresh/round<r>/<method>/. Before the
             rounds, engine AR runs once per benchmark into <out>/fresh/reference/ (untimed); its rows are
             copied into each contender's results file before its process starts, so that `run.py`, which
             resumes by cell key, runs the contender alone and checks its outputs against them.

Tokens/s per contender per repeat (round) are read back from the rows (goose.records.heldout, bench_run):
Σ tokens / Σ seconds over the prompts every contender completed, a ratio taken within a repeat, then
median [min, max] over repeats; `python -m analysis.heldout` (and `make figures`) writes the tables.

Resume: the same command goes on. The Spec-Bench run resumes as `make bench` does; a fresh process whose
rows are all written is not run again, one cut short is cleared and run again whole (a process is the
unit measured). One code state per run, as `make bench` (`--allow-mixed-code` mixes on purpose).

    python -m experiments.heldout --model smollm2-135m --dtype bfloat16 --threads 2     # or: make heldout
    python -m experiments.heldout --categories writing,qa --per-category 1 --repeats 1 \\
        --workloads spec_bench --max-new-tokens 16 --out results/runs/heldout/smoke   # a smoke run

Modules: `cli` (the arguments, checked before anything runs), `spec_categories` (the Spec-Bench run's
command), `fresh_process` (the fresh processes: their order, commands, resume), `driver` (runs both and
prints the verdicts); `python -m experiments.heldout` runs `driver.main`.
"""

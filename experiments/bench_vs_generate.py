"""Kept for `make bench` and old notes: the wall-clock comparison now lives in experiments/bench.py
(same options; see its docstring).

    python -m experiments.bench_vs_generate --benches humaneval --limit 10 --repeats 3
"""

from __future__ import annotations

from experiments.bench import main

if __name__ == "__main__":
    main()

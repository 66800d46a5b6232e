"""`python -m experiments.bench`: the side-by-side wall-clock protocol (experiments/bench/__init__.py)."""

from experiments.bench.driver import main

main()

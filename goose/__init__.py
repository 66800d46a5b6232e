"""goose-bench: training-free speculative decoding on one verification engine (docs/paper.md).

Packages, each depending only on those above: validation; engine (tree, drafter contract, KV cache, forward
backends, verification, decode loop, budget); sources (adjacency table, context matcher); method (Goose);
records (rows and metrics, torch-free); harness (config, models, benchmarks, runner, W&B); api
(`goose.speculate`, docs/api.md). The baselines package imports goose; goose never imports baselines.
"""

__all__ = ["Speculation", "speculate"]


def __getattr__(name: str):
    """`goose.speculate` and `goose.Speculation` (goose.api), imported on first use so that
    `import goose` stays light (no torch, no Hydra)."""
    if name in __all__:
        from goose import api

        return getattr(api, name)
    raise AttributeError(f"module 'goose' has no attribute {name!r}")

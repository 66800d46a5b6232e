"""goose-bench: training-free speculative decoding on one verification engine.

Packages, each depending only on those above it:
    goose.validation  range/type checks of user settings (no dependencies)
    goose.engine      the method-agnostic core: draft tree, drafter contract (and AR), KV cache,
                      lean forward, verification, decode loop, cost model, budget=auto
    goose.sources     token sources shared by drafters: adjacency table, context matcher
    goose.method      Goose itself: config (the paper's Table 5), confidence, spine tree, drafter
    goose.records     result rows and metrics; torch-free, so analysis/ can import it
    goose.harness     everything around a run: config schema, models, benchmarks, composition,
                      runner, Hydra job, W&B tracking
    goose.api         `goose.speculate`: one prompt, any configured method, a configured or
                      transformers model (docs/api.md)
The baselines (PLD, TR, isotropic, EAGLE-2-style) live in the top-level `baselines` package and
import from goose.engine / goose.sources; nothing under goose/ imports them.
"""

__all__ = ["Speculation", "speculate"]


def __getattr__(name: str):
    """`goose.speculate` and `goose.Speculation` (goose.api), imported on first use so that
    `import goose` stays light (no torch, no Hydra)."""
    if name in __all__:
        from goose import api

        return getattr(api, name)
    raise AttributeError(f"module 'goose' has no attribute {name!r}")

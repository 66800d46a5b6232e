"""goose-bench: training-free speculative decoding on one verification engine (docs/paper.md).

Packages, each depending only on those above: validation; engine (tree, drafter contract, KV cache, forward
backends, verification, decode loop, budget); sources (adjacency table, context matcher); method (Goose);
records (rows and metrics, torch-free); harness (config, models, benchmarks, runner, W&B). The baselines
package imports goose; goose never imports baselines.
"""

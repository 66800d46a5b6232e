"""Batched verification (continuous batching at a fixed concurrency): several requests, each with its own
drafter, tree, KV rows and position, verified in one forward. `BatchKVCache` holds the slots' rows,
`BatchEngine` verifies their ragged trees together, `serve` runs a closed loop of requests through it.
Batch size 1 stays with goose.engine.core.verifier.VerificationEngine.
"""

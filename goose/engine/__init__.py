"""The method-agnostic engine, in three layers: core/ (tree, drafter contract, KV cache, verifier,
decode loop, sampling), forward/ (backends a verification step runs through) and budget/ (the
cost model and budget=auto). Knows nothing about drafters' internals, Hydra, files or W&B."""

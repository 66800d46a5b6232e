"""The method-agnostic core: draft tree, drafter contract, KV cache, lean forward, verification
engine, decode loop, cost model and budget=auto. Knows nothing about drafters' internals, Hydra,
files or W&B."""

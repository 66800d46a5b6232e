"""The method-agnostic engine, in three layers: core/ (tree, drafter contract, KV cache, verifier,
decode loop, sampling), forward/ (backends a verification step runs through, plugged into core's
`ForwardBackend`) and budget/ (the cost model and budget=auto). Imports point down only: core imports
neither of the others. Knows nothing about drafters' internals, Hydra, files or W&B."""

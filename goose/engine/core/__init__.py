"""The engine's core: draft tree, drafter contract, tree KV cache, verifier, decode loop, sampling."""

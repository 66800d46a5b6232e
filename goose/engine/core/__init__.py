"""The engine's core: draft tree, drafter contract, tree KV cache, verifier, decode loop, sampling, and the
interface forward backends plug into (`backend`). The bottom layer: it imports nothing of forward/, budget/
or the packages above the engine."""

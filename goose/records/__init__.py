"""Result rows (JSONL I/O, cell keys) and metrics (τ, speedup, p_s, p_t). Torch-free: analysis/
imports it."""

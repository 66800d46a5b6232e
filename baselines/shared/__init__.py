"""What several baselines share and none owns (every top-level module of `baselines/` is one method)."""

"""Everything around a run: config schema, model and benchmark loading, composition of a run from
conf/, the runner that writes rows, the Hydra job, W&B tracking."""

"""The matched evaluation of verifiers for sampled drafts (results/studies/verifiers/), with the delayed
tree's shape per setting that it runs (results/studies/delayed_shape/)."""

"""The hardware-aware tree's study (results/studies/hw_tree/): where its wall-clock gap comes from, how well
its acceptance estimates are calibrated, what its size rule chose, and what a step cost inside the run."""

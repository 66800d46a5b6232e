"""The trained expansion selector of stand_select (arXiv 2602.16994 §5): `data` logs root features and the
exact value of every action on sampled runs, `train` fits the network and writes its file."""

"""Token sources shared by drafters: the adjacency table (successors from earlier logits) and the
context matcher (n-gram continuations from the prompt and output)."""

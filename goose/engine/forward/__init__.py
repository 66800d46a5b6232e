"""Forward backends the verifier can run a step through: the lean decoder forward, prepacked
linears, torch.compile and CUDA-graph replay. None of them knows about drafts or acceptance."""

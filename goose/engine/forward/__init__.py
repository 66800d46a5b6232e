"""Forward backends the verifier can run a step through: the lean decoder forward, prepacked
linears, torch.compile and CUDA-graph replay. They implement core's `ForwardBackend`
(goose.engine.core.backend) and `choose` builds one from the config; none of them knows about drafts or
acceptance."""

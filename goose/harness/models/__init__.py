"""Target models: `load` builds one from a `conf/model/*.yaml` (`load_model`, `ModelConfig`) out of a Hub
checkpoint (`hub`: the local cache first, the network only when reachable), a GGUF file shipped in a pip
package (`gguf`: dequantised once, cached as safetensors) or random weights in a paper model's shape
(`random_weights`, for timing only); `devices` checks device and dtype before any weights load.
"""

"""`make gpu-check` (`python -m experiments.gpu.check`): the engine proven on CUDA and the paper's shapes timed
at 7B scale, one stage per module (device_runs, lossless, timing, projection, figures; the profile, the
record and the closing summary beside them); `make gpu-carry` (`python -m experiments.gpu.carry`) and
host.sh: what an offline GPU host needs, and the run there."""

"""The scripts that run the paper's experiments and the studies beside it (`python -m experiments.<name>`).

Importing the package sets the environment every script runs in, before any of them imports transformers or
tokenizers: the Hub and its datasets offline (the models and benchmarks ship with the environment, see
goose.harness.models and goose.harness.benchmarks), and no tokenizer threads of their own. These are
defaults: a variable already set in the environment wins.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

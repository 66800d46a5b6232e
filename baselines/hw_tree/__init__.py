"""Hardware-aware tree (Sequoia, arXiv 2402.12374, §3.1 and §3.3) over every training-free source: the
drafter (`drafter`), its merged candidate trie and size choice (`pool`), and its online acceptance
estimates (`acceptance`)."""

from baselines.hw_tree.config import HwTreeConfig
from baselines.hw_tree.drafter import HwTreeDrafter

__all__ = ["HwTreeConfig", "HwTreeDrafter"]

"""Goose (arXiv 2604.02047): configuration (Table 5), confidence and budget rules, the spine tree,
and the drafter that combines them."""

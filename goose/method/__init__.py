"""Goose (arXiv 2604.02047, docs/paper.md): configuration (Table 5), confidence and budget rules (§4.3), the
spine tree (§4.1) and the drafter that combines them (§4).
"""

"""The scripts that serve one study each: one subpackage per study, named as its records' folder
results/studies/<name>/. `make figures` writes a script's files into figures/studies/<name>/, so the three
trees (records, scripts, figures) line up; scripts that read the canonical protocol stay in analysis/.
"""

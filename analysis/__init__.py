"""One script per figure or table, all reading results/ the same way (`make figures`: analysis.make_figures).

Importing the package selects matplotlib's non-interactive Agg backend before any script imports pyplot, so
that figures are drawn the same way on a machine without a display.
"""

import matplotlib

matplotlib.use("Agg")

"""The course layer: what serves the notebooks and nothing else.

Figures and diagrams, the probes that measure the paper's arguments, the side-by-side baselines,
the analysis helpers of notebooks 05-08, and ``checks`` (the exercises' checks).
"""

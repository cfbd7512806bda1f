"""The version (one truth: here; pyproject.toml reads it, ``[tool.setuptools.dynamic]``),
for the package and the reports that stamp it, without importing the pipeline.

A constant, not ``importlib.metadata.version("nfstrace")``: importing
importlib.metadata and reading the installed metadata cost 10-25 ms of every
report and JSON summary.
"""

from __future__ import annotations

__version__ = "0.1.0"

"""The installed version (one truth: pyproject.toml, as installed), for the
package and the reports that stamp it, without importing the pipeline."""

from __future__ import annotations

from importlib import metadata

try:
    __version__ = metadata.version("nfstrace")
except metadata.PackageNotFoundError:  # run from a source tree never installed
    __version__ = "0+unknown"

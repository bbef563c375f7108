"""A mission's report: its graph read once into typed values (``model``, ``read``), rendered as
Markdown (``markdown``: the transcript, ``cabal show``), JSON (the model itself) and one
self-contained HTML page (``html``, with the pictures of ``svg``).

Below ``cabal.rounds`` (the engine writes the transcript with it), above ``cabal.graph``.
"""

from cabal.report.model import MissionReport, Product, Version
from cabal.report.read import read_report

__all__ = ["MissionReport", "Product", "Version", "read_report"]

"""The membrane: every write to the context graph goes through a protocol (YAML steps) run here.

``Membrane`` runs protocols step by step (start / continue_session / abort) or as one form
(form / submit / run / prepare), validates every answer and commits each protocol's output as
one linked cluster with the moments that record who said what and why. It returns typed values
(``MembraneResult``, ``Form``, ``Cluster``, ``Created``) or raises a ``CabalError``.
"""

from cabal.membrane.protocol import Protocol
from cabal.membrane.results import AskView, Cluster, Created, Form, MembraneResult
from cabal.membrane.runner import Membrane
from cabal.membrane.validation import register_entity

__all__ = ["AskView", "Cluster", "Created", "Form", "Membrane", "MembraneResult", "Protocol", "register_entity"]

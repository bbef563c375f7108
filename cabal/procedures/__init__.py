"""Procedures: step-by-step guides an agent follows, with its work kept in a run space of the graph.

A procedure file (``procedures/<name>.yaml``; a user's folder adds to or overrides by name)::

    procedure: write_adr              # must equal the file name
    description: Write an architecture decision record.
    steps:
      - id: frame
        title: Frame the decision
        guide:                        # what, why and how are required (A3); watch_out optional
          what: Write down the one question the decision answers.
          why: A decision without a question cannot be judged later.
          how: Record a narrative of type question whose content states ...
          watch_out: Do not smuggle the answer into the question.
      - id: options
        title: List the options
        guide: {what: ..., why: ..., how: ...}
        validation:                   # entry gate: checked before this step may start
          requires:                   # nodes the run space must contain
            - {node_type: narrative, type: question, min: 1, fields: [content]}
          links:                      # links leaving run-space nodes
            - {type: about, from: {node_type: narrative, type: option},
               to: {node_type: narrative, type: question}, min: 2}
    completion:                       # optional exit gate of the last step (same shape)
      requires: [{node_type: narrative, type: consequence, min: 2}]

``min`` defaults to 1; ``fields`` lists fields that must be filled; ``from``/``to`` may be left
out to match any node. Node and link types must exist in the graph schema. Loading refuses a
file with any problem and lists them all, each located by file, line, step and field
(``ProtocolLoadError``).

In the graph, a procedure is a template (``template.py``): a space of type ``procedure`` whose
id carries the content hash, containing one narrative of type ``step`` per step (the rendered
guide in ``content``), chained with ``precedes``. A run is a space of type ``run``; its links
say where it is (``state.py``). ``Procedures`` (``runtime.py``) is the API::

    procedures = Procedures(graph, dirs=())
    procedures.start_procedure("write_adr", "actor:ada")  # RunStep(run_id, status, step_id, step_content, ...)
    procedures.record(run_id, "actor:ada", nodes, links)  # the agent's work, into the run space
    procedures.continue_procedure(run_id)                 # status active | validation_failed | completed
    procedures.end_procedure(run_id)
    procedures.recover(run_id)                            # repair a run without one active step
"""

from cabal.procedures.loader import list_procedures, load_file, load_procedure, parse_procedure
from cabal.procedures.model import (Guide, LinkRequirement, NodeRequirement, Procedure, Recorded, RunStep, Selector,
                                    Step, Validation)
from cabal.procedures.runtime import Procedures
from cabal.procedures.state import RunState
from cabal.procedures.template import Template, template_id

__all__ = [
    "Guide",
    "LinkRequirement",
    "NodeRequirement",
    "Procedure",
    "Procedures",
    "Recorded",
    "RunState",
    "RunStep",
    "Selector",
    "Step",
    "Template",
    "Validation",
    "list_procedures",
    "load_file",
    "load_procedure",
    "parse_procedure",
    "template_id",
]

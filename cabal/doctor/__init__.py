"""The doctor: finds gaps in a context graph and closes them through the membrane (pattern P8).

An application on top of the membrane: ``gaps`` says what is missing, a skill (``cabal.skills``)
says which protocol fills it, an answerer (a model, a script or a function) answers the
protocol's form, and the membrane validates and commits.
"""

from cabal.doctor.answerers import Answerer, AnswerRequest, ModelAnswerer, ScriptedAnswers
from cabal.doctor.doctor import DOCTOR_ACTOR, Doctor, Outcome, Treatment
from cabal.doctor.gaps import GAP_KINDS, Gap, find_gaps, is_open

__all__ = ["DOCTOR_ACTOR", "GAP_KINDS", "AnswerRequest", "Answerer", "Doctor", "Gap", "ModelAnswerer", "Outcome",
           "ScriptedAnswers", "Treatment", "find_gaps", "is_open"]

"""Evaluating a team: a batch's missions checked against what each request expects, K times each.

``expect`` (the vocabulary of expectations and their pure checks), ``judge`` (rubric questions
a model scores), ``run`` (an evaluation on the batch machinery, stored, compared), ``render``
(its reports). ``cabal eval`` is the command.
"""

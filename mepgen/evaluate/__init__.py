"""The evaluator: does a variant of kernel.cu compute the same outputs, and is it measurably faster?

Stages lint -> compile -> run -> verify -> time (evaluator.py), on one of two backends behind one
interface (backend.py): native (the MEP harness as a subprocess) or pycuda (a worker process keeping
the inputs on the GPU). Many candidates at once: batch.py. Results: results.py. `mepgen run`: command.py.
"""
from .evaluator import Evaluator, Options
from .results import EvalResult

__all__ = ["Evaluator", "Options", "EvalResult"]

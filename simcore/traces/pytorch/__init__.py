"""PyTorch traces: ex-situ tracing of a training step and import of ExecutionTraceObserver JSON.

``torch`` is an optional extra (``pip install 'simsweep[trace]'``); only the modules that record a
live model import it, lazily, through :func:`simcore.traces.pytorch.torch_import.require_torch`.
"""

"""search: the orchestrator around simcore (Hydra configs, Optuna, Ray, MLflow, polars).

This is the only package that imports the orchestration libraries; simcore never imports it.
"""

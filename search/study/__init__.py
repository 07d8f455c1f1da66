"""Optuna co-design studies: space, storage, ask/tell loop, evaluation, objectives, report."""

"""Evaluation of design points, shared by sweeps and studies: the pure batch evaluation,
the Ray worker pool and the results tables."""

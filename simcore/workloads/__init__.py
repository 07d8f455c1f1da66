"""Workload families: a generator per family turns a spec and a parallelization into a graph."""

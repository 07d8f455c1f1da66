"""Heterogeneous clusters: HAP's sharding ratios (:mod:`.ratios`) and its per-tensor program
choice (:mod:`.hap`) on top of the per-device cost models."""

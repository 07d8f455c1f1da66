"""Recommendation models: DLRM (Naumov et al. 2019), model-parallel embeddings, data-parallel MLPs."""

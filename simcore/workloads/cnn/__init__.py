"""Convolutional networks: the ResNet family (He et al., CVPR 2016) as a data-parallel workload."""

"""VGG layer shapes (Simonyan & Zisserman, ICLR 2015, Table 1; the reference implementation
torchvision ``models/vgg.py``, configurations A/B/D/E = VGG11/13/16/19 without batch norm).

3x3 convolutions (stride 1, padding 1, bias) with ReLU, 2x2/2 max pools between the blocks, an
adaptive average pool to 7x7 and the classifier ``512*7*7 -> 4096 -> 4096 -> classes`` (Linear
layers with bias, ReLU and dropout). On inputs smaller than 224 the feature map before the
adaptive pool is smaller than 7x7 and the pool replicates it (CIFAR's 32x32: 1x1 -> 7x7, 49
copies of 512 values): the classifier input is determined by ``512 h^2`` values. VGG19 with
1000 classes has 143,667,240 parameters (torchvision's model table); at 224x224 its
convolutions cost 19.5 G multiply-accumulates per image. Used by HAP's heterogeneous
experiments (VGG19 on CIFAR-10: :mod:`simcore.hetero.hap`).
"""

from __future__ import annotations

from dataclasses import dataclass

from simcore.errors import require

__all__ = ["CONFIGS", "VggLayer", "vgg_layers", "vgg_params"]

#: depth -> channels per convolution, 0 = max pool (torchvision ``cfgs`` A, B, D, E)
CONFIGS: dict[int, tuple[int, ...]] = {
    11: (64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0),
    13: (64, 64, 0, 128, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0),
    16: (64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0),
    19: (64, 64, 0, 128, 128, 0, 256, 256, 256, 256, 0, 512, 512, 512, 512, 0,
         512, 512, 512, 512, 0),
}


@dataclass(frozen=True)
class VggLayer:
    """A 3x3 convolution (``conv``: ``c_in -> c_out`` on ``h x h``), a 2x2 max pool (``pool``)
    or a Linear layer (``fc``: ``c_in -> c_out``; ``gather_in``: values per sample that
    determine its input, fewer than ``c_in`` after a replicating adaptive pool)."""

    name: str
    kind: str
    c_in: int
    c_out: int
    h: int = 1
    gather_in: int = 0

    @property
    def macs(self) -> int:
        """Multiply-accumulates per sample."""
        if self.kind == "conv":
            return self.h * self.h * self.c_out * self.c_in * 9
        return self.c_in * self.c_out if self.kind == "fc" else 0

    @property
    def params(self) -> int:
        """Weights and bias."""
        if self.kind == "conv":
            return self.c_out * self.c_in * 9 + self.c_out
        return (self.c_in + 1) * self.c_out if self.kind == "fc" else 0


def vgg_layers(depth: int = 19, image_size: int = 224, num_classes: int = 1000) -> list[VggLayer]:
    """The layers of a VGG in forward order (max pools included, no parameters)."""
    require(depth in CONFIGS, "vgg.depth", depth, f"must be one of {sorted(CONFIGS)}")
    require(isinstance(image_size, int) and image_size >= 32 and image_size % 32 == 0,
            "vgg.image_size", image_size, "must be a multiple of 32")
    out: list[VggLayer] = []
    c, h = 3, image_size
    for i, v in enumerate(CONFIGS[depth]):
        if v == 0:
            out.append(VggLayer(f"pool{i}", "pool", c, c, h))
            h //= 2
        else:
            out.append(VggLayer(f"conv{i}", "conv", c, v, h))
            c = v
    flat = 512 * 7 * 7
    out.append(VggLayer("fc1", "fc", flat, 4096, gather_in=min(flat, 512 * h * h)))
    out.append(VggLayer("fc2", "fc", 4096, 4096, gather_in=4096))
    out.append(VggLayer("fc3", "fc", 4096, num_classes, gather_in=4096))
    return out


def vgg_params(depth: int = 19, num_classes: int = 1000) -> int:
    """Trainable parameters (torchvision ``sum(p.numel() for p in model.parameters())``)."""
    return sum(layer.params for layer in vgg_layers(depth, 224, num_classes))

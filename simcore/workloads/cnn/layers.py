"""ResNet layer list: every convolution, batch norm, pooling and the classifier with its shapes.

The shapes follow :class:`~simcore.workloads.cnn.spec.ResNetSpec` (torchvision ``resnet.py``). A
convolution of ``c_in -> c_out`` channels, kernel ``k``, stride ``s``, padding ``k // 2`` on an
``h x h`` input gives ``h_out = (h + 2 (k // 2) - k) // s + 1`` and costs
``h_out^2 c_out c_in k^2`` multiply-accumulates per image (ResNet-50 at 224: 4.09 G, the
"~4.1 GFLOPs" of torchvision's model table and 3.8 G of the paper's Table 1, which counts the
v1 stride placement). The list is pure shapes; :mod:`.family` turns it into kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcore.workloads.cnn.spec import ResNetSpec

__all__ = ["Conv", "Pool", "resnet_layers", "resnet_macs", "resnet_params"]


@dataclass(frozen=True)
class Conv:
    """A convolution followed by batch norm (and ReLU unless ``relu`` is false).

    ``residual``: the block's skip connection is added after this batch norm.
    """

    name: str
    c_in: int
    c_out: int
    k: int
    stride: int
    h_in: int
    relu: bool = True
    residual: bool = False
    first: bool = False  # the stem: no gradient w.r.t. the input image

    @property
    def h_out(self) -> int:
        """Output height (= width)."""
        return (self.h_in + 2 * (self.k // 2) - self.k) // self.stride + 1

    @property
    def macs(self) -> int:
        """Multiply-accumulates per image."""
        return self.h_out ** 2 * self.c_out * self.c_in * self.k ** 2

    @property
    def params(self) -> int:
        """Convolution weights (no bias) + batch-norm weight and bias."""
        return self.c_out * self.c_in * self.k ** 2 + 2 * self.c_out


@dataclass(frozen=True)
class Pool:
    """Max pool 3x3/2 (``kind = max``), global average pool (``avg``) or the classifier (``fc``)."""

    name: str
    kind: str
    channels: int
    h_in: int
    h_out: int
    outputs: int = 0  # fc: classes

    @property
    def macs(self) -> int:
        """Multiply-accumulates per image (the classifier only)."""
        return self.channels * self.outputs if self.kind == "fc" else 0

    @property
    def params(self) -> int:
        """Classifier weight and bias."""
        return (self.channels + 1) * self.outputs if self.kind == "fc" else 0


def resnet_layers(spec: ResNetSpec) -> list[Conv | Pool]:
    """The layers of ``spec`` in forward order."""
    h = spec.image_size
    stem = Conv("stem", 3, 64, 7, 2, h, first=True)
    out: list[Conv | Pool] = [stem]
    h = stem.h_out
    pool_h = (h + 2 - 3) // 2 + 1
    out.append(Pool("maxpool", "max", 64, h, pool_h))
    h, c = pool_h, 64
    bottleneck = spec.block_kind == "bottleneck"
    expansion = 4 if bottleneck else 1
    for i, (planes, blocks) in enumerate(zip((64, 128, 256, 512), spec.stage_blocks, strict=True)):
        for j in range(blocks):
            stride = 2 if (i > 0 and j == 0) else 1
            tag = f"layer{i + 1}.{j}"
            c_out = planes * expansion
            if j == 0 and (stride != 1 or c != c_out):
                out.append(Conv(f"{tag}.downsample", c, c_out, 1, stride, h, relu=False))
            if bottleneck:
                w = planes * spec.width // 64
                a = Conv(f"{tag}.conv1", c, w, 1, 1, h)
                b = Conv(f"{tag}.conv2", w, w, 3, stride, h)
                last = Conv(f"{tag}.conv3", w, c_out, 1, 1, b.h_out, residual=True)
                out += [a, b, last]
            else:
                a = Conv(f"{tag}.conv1", c, planes, 3, stride, h)
                last = Conv(f"{tag}.conv2", planes, planes, 3, 1, a.h_out, residual=True)
                out += [a, last]
            h, c = last.h_out, c_out
    out.append(Pool("avgpool", "avg", c, h, 1))
    out.append(Pool("fc", "fc", c, 1, 1, spec.num_classes))
    return out


def resnet_macs(spec: ResNetSpec) -> int:
    """Forward multiply-accumulates per image (convolutions and the classifier)."""
    return sum(layer.macs for layer in resnet_layers(spec))


def resnet_params(spec: ResNetSpec) -> int:
    """Trainable parameters (torchvision ``sum(p.numel() for p in model.parameters())``)."""
    return sum(layer.params for layer in resnet_layers(spec))

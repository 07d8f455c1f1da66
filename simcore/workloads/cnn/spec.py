"""ResNet shapes: :class:`ResNetSpec` (the ``workload`` group with ``family: resnet``).

Architecture (He et al., "Deep Residual Learning for Image Recognition", CVPR 2016, Table 1; the
reference implementation torchvision ``models/resnet.py``, "ResNet v1.5": the stride of a
bottleneck sits on its 3x3 convolution): a 7x7/2 stem convolution with 64 channels, batch norm,
ReLU and a 3x3/2 max pool; four stages of residual blocks with 64, 128, 256, 512 planes (stride 1,
2, 2, 2), basic blocks (two 3x3 convolutions, expansion 1) for depth 18/34 and bottlenecks
(1x1, 3x3, 1x1, expansion 4) for 50/101/152; a 1x1/stride projection (convolution + batch norm)
on the first block of a stage whose shape changes; global average pooling and a fully connected
classifier with bias. Convolutions have no bias; a batch norm has a weight and a bias per
channel (its running statistics are buffers, not parameters). ``width`` is torchvision's
``width_per_group``: a bottleneck's inner width is ``planes * width / 64`` (128 = Wide ResNet-50-2).
"""

from __future__ import annotations

from dataclasses import dataclass

from simcore.errors import require

__all__ = ["BLOCKS", "DEPTHS", "ResNetSpec"]

#: depth -> (block kind, blocks per stage) (He et al. 2016, Table 1)
DEPTHS: dict[int, tuple[str, tuple[int, int, int, int]]] = {
    18: ("basic", (2, 2, 2, 2)),
    34: ("basic", (3, 4, 6, 3)),
    50: ("bottleneck", (3, 4, 6, 3)),
    101: ("bottleneck", (3, 4, 23, 3)),
    152: ("bottleneck", (3, 8, 36, 3)),
}
BLOCKS = ("auto", "basic", "bottleneck")


@dataclass(frozen=True)
class ResNetSpec:
    """A ResNet and how its data-parallel training is run.

    Attributes:
        name: label.
        depth: 18, 34, 50, 101 or 152.
        block: ``auto`` (the paper's block for the depth), ``basic`` or ``bottleneck``.
        width: torchvision ``width_per_group`` (64; basic blocks need 64).
        image_size: input height = width, pixels.
        num_classes: classifier outputs.
        bucket_mb: DDP gradient bucket size, MB (``bucket_cap_mb``, PyTorch default 25).
        grad_bytes: bytes per gradient element on the wire (4: fp32 gradients under AMP).
    """

    name: str = "resnet50"
    depth: int = 50
    block: str = "auto"
    width: int = 64
    image_size: int = 224
    num_classes: int = 1000
    bucket_mb: float = 25.0
    grad_bytes: int = 4

    def __post_init__(self) -> None:
        p = "workload."
        require(self.depth in DEPTHS, p + "depth", self.depth,
                f"must be one of {', '.join(map(str, DEPTHS))}")
        require(self.block in BLOCKS, p + "block", self.block,
                f"unknown layer kind; must be one of {', '.join(BLOCKS)}")
        require(isinstance(self.width, int) and self.width >= 1 and self.width % 16 == 0,
                p + "width", self.width, "must be a positive multiple of 16")
        require(self.block_kind == "bottleneck" or self.width == 64, p + "width", self.width,
                "basic blocks only support width 64 (torchvision BasicBlock)")
        require(isinstance(self.image_size, int) and self.image_size >= 32, p + "image_size",
                self.image_size, "must be an integer >= 32")
        require(isinstance(self.num_classes, int) and self.num_classes >= 1, p + "num_classes",
                self.num_classes, "must be an integer >= 1")
        require(self.bucket_mb > 0, p + "bucket_mb", self.bucket_mb, "must be > 0")
        require(self.grad_bytes in (2, 4), p + "grad_bytes", self.grad_bytes, "must be 2 or 4")

    @property
    def block_kind(self) -> str:
        """``basic`` or ``bottleneck``."""
        return DEPTHS[self.depth][0] if self.block == "auto" else self.block

    @property
    def stage_blocks(self) -> tuple[int, int, int, int]:
        """Residual blocks per stage."""
        return DEPTHS[self.depth][1]

"""What one vision rank trains and is tested on: Scenario A's MNIST sets (upsampled on the host,
or on the device per batch), Scenario B's prepared sets (unpacked in host memory, or read by DALI),
each strategy's sampler, and the copy of a batch to the device.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.data import (
    DataLoader,
    Dataset,
    DistributedSampler,
    RandomSampler,
    Subset,
    TensorDataset,
)

from run.vision import digits, scenario_b
from run.vision.tvcompat import import_torchvision

# MNIST's mean and std of the grey channel, repeated for the three channels MobileNetV2 takes.
MNIST_MEAN, MNIST_STD = (0.1307,) * 3, (0.3081,) * 3


class ToDtype:
    """The sample in the precision's dtype, so the DataLoader pins (and the GPU receives) exactly
    that many bytes. A class, not a lambda, so DataLoader workers can pickle it."""

    def __init__(self, dtype: torch.dtype) -> None:
        self.dtype = dtype

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(self.dtype)


def scenario_a_transform(size: int, dtype: torch.dtype = torch.float32):  # noqa: ANN201
    transforms = import_torchvision().transforms
    return transforms.Compose(
        [
            transforms.Resize((size, size)),
            transforms.Grayscale(num_output_channels=3),
            transforms.ToTensor(),
            transforms.Normalize(MNIST_MEAN, MNIST_STD),
            ToDtype(dtype),
        ]
    )


def upsample_on_device(
    x: torch.Tensor,
    size: int,
    dtype: torch.dtype,
    memory_format: torch.memory_format = torch.contiguous_format,
) -> torch.Tensor:
    """scenario_a_transform for a uint8 (N, 28, 28) batch on the device: PIL's antialiased
    bilinear resize rounds to 8 bits (half up) after the rows and again after the columns; float32
    like the host path, cast last (PIL's fixed-point weights may put a pixel one level away)."""
    x = x.unsqueeze(1).float()
    for rows in (x.shape[-2], size):  # width first, then height, as PIL does
        x = F.interpolate(x, size=(rows, size), mode="bilinear", antialias=True)
        x = x.add_(0.5).floor_().clamp_(0, 255)
    x = (x / 255 - MNIST_MEAN[0]) / MNIST_STD[0]
    # .to() hands back the expanded view itself when dtype and layout already match (fp32,
    # contiguous_format): a stride-0 channel dim. Make it a real batch in the asked layout.
    return x.expand(-1, 3, -1, -1).to(dtype=dtype).contiguous(memory_format=memory_format)


def make_sampler(
    strategy: str, dataset_len: int, world: int, rank: int, seed: int
) -> DistributedSampler | RandomSampler:
    if strategy == "ddp_ds":
        return DistributedSampler(range(dataset_len), num_replicas=world, rank=rank, seed=seed)
    return RandomSampler(range(dataset_len), generator=torch.Generator().manual_seed(seed))


def set_epoch(sampler: DistributedSampler | RandomSampler, epoch: int, seed: int) -> None:
    if isinstance(sampler, DistributedSampler):
        sampler.set_epoch(epoch)
    else:
        sampler.generator.manual_seed(seed + epoch)


def keeps_batch(strategy: str, batch_index: int, world: int, rank: int) -> bool:
    return strategy != "ddp_rr" or batch_index % world == rank


def data_sets(spec: dict[str, Any], dtype: torch.dtype = torch.float32) -> tuple[Dataset, Dataset]:
    """Scenario A's train and test sets: upsampled on the host as loaded, or (upsample=device)
    the stored uint8 28x28 tensors."""
    datasets = import_torchvision().datasets
    root = digits.data_root(spec["dataset"])
    host = spec["upsample"] == "host"
    tf = scenario_a_transform(spec["image_size"], dtype) if host else None
    train = datasets.MNIST(str(root), train=True, download=False, transform=tf)
    test = datasets.MNIST(str(root), train=False, download=False, transform=tf)
    n, m = spec["train_images"], spec["test_images"]
    if len(train) < n or len(test) < m:
        raise ValueError(
            f"{root} holds {len(train)}/{len(test)} train/test images; the spec needs {n}/{m}"
        )
    if host:
        return Subset(train, range(n)), Subset(test, range(m))
    return TensorDataset(train.data[:n], train.targets[:n]), TensorDataset(
        test.data[:m], test.targets[:m]
    )


def to_device(x: torch.Tensor, y: torch.Tensor, device: torch.device, spec: dict[str, Any],
              dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """One batch to the device (upsample=device: made into the model's input there). A blocking
    copy makes the host wait: today's loop without pin_memory. host_sync=epoch copies non_blocking:
    from pageable memory the driver stages the batch before returning (CUDA's API sync behaviour),
    from pinned memory the caching host allocator keeps the block until the copy is done."""
    non_blocking = spec["pin_memory"] or spec["host_sync"] == "epoch"
    x = x.to(device, non_blocking=non_blocking)
    y = y.to(device, non_blocking=non_blocking)
    fmt = torch.channels_last if spec["channels_last"] else torch.contiguous_format
    if spec["upsample"] == "device":
        x = upsample_on_device(x, spec["image_size"], dtype, fmt)
    elif spec["channels_last"] and not x.is_contiguous(memory_format=fmt):
        x = x.contiguous(memory_format=fmt)
    return x, y


@dataclass
class Loaders:
    """One rank's batches; `sampler` is reseeded every epoch, None under DALI (it shuffles)."""

    train: Iterable[tuple[torch.Tensor, torch.Tensor]]
    test: Iterable[tuple[torch.Tensor, torch.Tensor]]
    sampler: DistributedSampler | RandomSampler | None


def build_loaders(
    spec: dict[str, Any], dtype: torch.dtype, device: torch.device, rank: int, world: int
) -> Loaders:
    if spec["loader"] == "dali":  # DALI reads, decodes and shards the prepared files itself
        path = scenario_b.for_spec(spec)
        cuda = device.type == "cuda"
        dali = dict(batch=spec["batch_size"], rank=rank, world=world, seed=spec["seed"],
                    device_id=device.index if cuda else None, nhwc=spec["channels_last"],
                    labels_on_gpu=spec["host_sync"] == "epoch")  # fmt: skip
        train_loader = scenario_b.DaliLoader(path, "train", shuffle=True, **dali)
        test_loader = scenario_b.DaliLoader(path, "test", shuffle=False, **dali)
        return Loaders(train_loader, test_loader, None)
    if spec["scenario"] == "B":  # every rank unpacks the whole set into host memory
        path = scenario_b.for_spec(spec)
        train_set = scenario_b.Unpacked(path, "train", dtype)
        test_set = scenario_b.Unpacked(path, "test", dtype)
    else:
        train_set, test_set = data_sets(spec, dtype)
    sampler = make_sampler(spec["strategy"], len(train_set), world, rank, spec["seed"])
    loader_kw = dict(
        batch_size=spec["batch_size"],
        num_workers=spec["num_workers"],
        pin_memory=spec["pin_memory"],
        persistent_workers=spec["num_workers"] > 0,
    )
    train_loader = DataLoader(train_set, sampler=sampler, **loader_kw)
    # Evaluation is sharded alike for every strategy: rank r scores test images r, r+W, ...
    test_loader = DataLoader(Subset(test_set, range(rank, len(test_set), world)), **loader_kw)
    return Loaders(train_loader, test_loader, sampler)

"""Benchmark: images/s of the real training loop against the same loop fed from memory.

    python -m run.bench.vision [--sizes 32 64] [--steps 30] [--batch-size 32]

The same model, optimiser and precision (fp32) on one device (a GPU if visible): the real loop
reads MNIST-format files through the Scenario A DataLoader (resize, 3 channels, normalise on the
CPU), the synthetic one reuses tensors on the device (a free data pipeline's ceiling); their ratio
is the share of the ceiling the real pipeline reaches. Warm-up steps are not timed; the loops
alternate --repeats times, best of each.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from typing import Any

import torch
from torch.utils.data import DataLoader, Subset

from run.program import program
from run.vision import launch as vision_launch
from run.vision.digits import data_root
from run.vision.inputs import scenario_a_transform, to_device
from run.vision.loop import precision_setup, train_step
from run.vision.tvcompat import import_torchvision

WARMUP = 3


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def model_and_batch(device: torch.device, batch: int, size: int) -> tuple[Any, ...]:
    """(MobileNetV2 fp32 seeded, its Adam, a random batch x, y), all on the device."""
    torch.manual_seed(0)
    model = import_torchvision().models.mobilenet_v2(num_classes=10).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(batch, 3, size, size, device=device)
    return model, opt, x, torch.randint(0, 10, (batch,), device=device)


def timed_loop(model, opt, batches, device: torch.device, steps: int, prec: Any = None,  # noqa: ANN001
               spec: dict[str, Any] | None = None) -> float:  # fmt: skip
    """Images per second over `steps` steps after WARMUP untimed ones (fp32 unless `prec`); with
    a run's `spec` the batch goes to the device as the run copies it."""
    prec = prec or precision_setup("fp32", device)
    images, t0 = 0, 0.0
    for i, (x, y) in enumerate(itertools.islice(batches, steps + WARMUP)):
        if i == WARMUP:
            _sync(device)
            t0 = time.perf_counter()
        if spec is None:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        else:
            x, y = to_device(x, y, device, spec, prec.input_dtype)
        train_step(model, opt, prec, x, y)
        images += y.numel() if i >= WARMUP else 0
    _sync(device)
    return images / (time.perf_counter() - t0)


@program()
def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--sizes", type=int, nargs="+", default=None, help="default: 32 64 (CPU), 100 500 (GPU)"
    )
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3, help="alternating repeats; best one kept")
    ap.add_argument("--num-workers", type=int, default=None, help="default: 0 (CPU), 4 (GPU)")
    ap.add_argument("--dataset", choices=["digits", "mnist"], default=None)
    args = ap.parse_args(argv)
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    sizes = args.sizes or ([100, 500] if cuda else [32, 64])
    workers = args.num_workers if args.num_workers is not None else (4 if cuda else 0)
    dataset = args.dataset or ("mnist" if cuda else "digits")
    n_images = args.batch_size * (args.steps + WARMUP)
    spec = {"dataset": dataset, "train_images": n_images, "test_images": 1}
    vision_launch.preflight([spec])
    tv = import_torchvision()
    root = str(data_root(dataset))
    print(
        f"bench-vision: MobileNetV2 fp32 on {device} ({torch.get_num_threads()} CPU threads), "
        f"batch {args.batch_size}, {args.steps} timed steps after {WARMUP} warm-up, "
        f"best of {args.repeats} alternating repeats, "
        f"{workers} loader workers, data '{dataset}'"
    )
    print(f"{'size':>6} {'real img/s':>12} {'synthetic img/s':>16} {'real/synthetic':>15}")
    for size in sizes:
        model, opt, x, y = model_and_batch(device, args.batch_size, size)
        ds = Subset(
            tv.datasets.MNIST(root, train=True, transform=scenario_a_transform(size)),
            range(n_images),
        )
        loader = DataLoader(
            ds,
            batch_size=args.batch_size,
            shuffle=True,
            num_workers=workers,
            pin_memory=cuda,
            drop_last=True,
        )
        # alternating, best of each: a burst of load elsewhere slows one repeat, not one side
        real = synthetic = 0.0
        for _ in range(args.repeats):
            real = max(real, timed_loop(model, opt, iter(loader), device, args.steps))
            synth = timed_loop(model, opt, itertools.repeat((x, y)), device, args.steps)
            synthetic = max(synthetic, synth)
        print(f"{size:>5}px {real:>12.1f} {synthetic:>16.1f} {real / synthetic:>15.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

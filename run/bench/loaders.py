"""Benchmark: images/s of the Scenario B loaders against the synthetic in-memory ceiling.

    python -m run.bench.loaders [--size 32] [--steps 30] [--batch-size 32]

One training loop (MobileNetV2 fp32, one device: a GPU if visible) fed by the DataLoader (the set
unpacked in host float32, normalised at load time, pinned on a GPU), by DALI (decoding the JPEGs,
`mixed` on a GPU) and by tensors already on the device (the ceiling). Each images/s is printed
with its ratio to the ceiling; the loops alternate --repeats times, best of each, warm-up untimed.
"""

from __future__ import annotations

import argparse
import itertools
import sys

import torch
from torch.utils.data import DataLoader

from run.bench.vision import WARMUP, model_and_batch, timed_loop
from run.errors import UserError
from run.program import program
from run.vision import launch as vision_launch
from run.vision import scenario_b


def endless(make):  # noqa: ANN001, ANN201
    """Batches from a loader made again whenever it runs out."""
    while True:
        yield from make()


@program()
def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--size", type=int, default=None, help="default: 32 (CPU), 300 (GPU)")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--num-workers", type=int, default=None, help="default: 0 (CPU), 4 (GPU)")
    args = ap.parse_args(argv)
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    size = args.size or (300 if cuda else 32)
    workers = args.num_workers if args.num_workers is not None else (4 if cuda else 0)
    n = args.batch_size * 8  # a small set, read again as often as the steps need
    spec = {"dataset": "digits", "scenario": "B", "loader": "dali", "image_size": size,
            "train_images": n, "test_images": 1}  # fmt: skip
    try:
        vision_launch.preflight([spec])
    except ValueError as exc:  # bad input, not a bug of ours
        raise UserError(str(exc)) from exc
    path = scenario_b.for_spec(spec)
    unpacked = scenario_b.Unpacked(path, "train", torch.float32)
    loader = DataLoader(unpacked, batch_size=args.batch_size, shuffle=True, drop_last=True,
                        num_workers=workers, pin_memory=cuda)  # fmt: skip
    dali = scenario_b.DaliLoader(path, "train", args.batch_size, 0, 1,
                                 0 if cuda else None, False, True, 0)  # fmt: skip
    model, opt, x, y = model_and_batch(device, args.batch_size, size)
    # one endless stream per loader, continued across repeats (DALI's epochs are never cut)
    feeds = {
        "DataLoader": endless(lambda: iter(loader)),
        "DALI": endless(lambda: iter(dali)),
        "synthetic": itertools.repeat((x, y)),
    }
    best = dict.fromkeys(feeds, 0.0)
    for _ in range(args.repeats):
        for name, feed in feeds.items():
            best[name] = max(best[name], timed_loop(model, opt, feed, device, args.steps))
    print(f"bench-loaders: MobileNetV2 fp32 on {device}, Scenario B {size} px, batch "
          f"{args.batch_size}, {args.steps} timed steps after {WARMUP} warm-up, best of "
          f"{args.repeats}, {workers} DataLoader workers, DALI decoding on "
          f"{'the GPU (mixed)' if cuda else 'the CPU'}")  # fmt: skip
    print(f"{'loader':>12} {'img/s':>10} {'of ceiling':>11}")
    for name, v in best.items():
        print(f"{name:>12} {v:>10.1f} {v / best['synthetic']:>11.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Scenario B (J 4.3, V8-V11): MNIST prepared ahead as colour JPEGs, read by DataLoader or DALI.

    python -m run.vision.scenario_b prepare --dataset digits --size 32 --train 256 --test 128

Made once from the MNIST-format files and reused by every run:

    <SCENARIO_B_DIR>/<dataset>-<size>px-n<train>-t<test>/{train,test}/<label>/<index>.jpg
                                                       manifest.json   (written last)

One folder per class is what both readers take as it is: DALI's `fn.readers.file` (labels from
the sorted folder names) and PIL. The paper's set at 300 px was about 3 GB. A set without a
manifest, or whose files do not match it, is not used.

- DataLoader: each rank unpacks the WHOLE set into float32 host tensors (the paper: about 68 GB
  per rank at 300 px; V11 is about where that memory sits) and normalises at load time.
- DALI: reads and decodes the files itself (`mixed` on a GPU), normalises, sharded by rank.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np

from run import settings, store
from run.errors import UserError
from run.program import program
from run.vision import digits

MANIFEST = "manifest.json"
SPLITS = ("train", "test")
MEAN, STD = 0.1307, 0.3081  # MNIST's, on every channel (the images are grey in three channels)
BYTES_PER_VALUE = 4  # float32, as the paper's DataLoader held the unpacked set
# DALI's CPU threads per rank: on a GPU node two feed the mixed decoder; on a CPU each rank's
# loader gets one, counted in its CPU share (run/node/threads.py) as DataLoader workers are
DALI_GPU_THREADS, DALI_CPU_THREADS = 2, 1


def set_dir(dataset: str, size: int, n_train: int, n_test: int, root: Path | None = None) -> Path:
    return (root or settings.value("SCENARIO_B_DIR")) / f"{dataset}-{size}px-n{n_train}-t{n_test}"


def for_spec(spec: dict[str, Any]) -> Path:
    return set_dir(spec["dataset"], spec["image_size"], spec["train_images"], spec["test_images"])


def unpacked_bytes(size: int, n_train: int, n_test: int) -> int:
    return (n_train + n_test) * 3 * size * size * BYTES_PER_VALUE


def _read_idx(path: Path) -> np.ndarray:
    raw = path.read_bytes()
    ndim = raw[3]
    dims = np.frombuffer(raw[4 : 4 + 4 * ndim], dtype=">u4").astype(int)
    return np.frombuffer(raw[4 + 4 * ndim :], dtype=np.uint8).reshape(dims)


def prepare(src_root: Path, dataset: str, size: int, n_train: int, n_test: int,
            root: Path | None = None) -> Path:  # fmt: skip
    out = set_dir(dataset, size, n_train, n_test, root)
    try:
        check(out)
        return out
    except FileNotFoundError:
        pass
    except ValueError:
        shutil.rmtree(out)  # corrupt: made again from scratch
    from PIL import Image

    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    counts = {}
    for split, n in zip(SPLITS, (n_train, n_test), strict=True):
        img_file, lab_file = digits.FILES[split]
        images = _read_idx(digits.raw_dir(src_root) / img_file)
        labels = _read_idx(digits.raw_dir(src_root) / lab_file)
        if len(images) < n:
            raise FileNotFoundError(
                f"{digits.raw_dir(src_root)} has {len(images)} {split} images, the set needs {n}"
            )
        for i in range(n):
            d = tmp / split / str(int(labels[i]))
            d.mkdir(parents=True, exist_ok=True)
            im = Image.fromarray(images[i], mode="L").resize((size, size), Image.BILINEAR)
            im.convert("RGB").save(d / f"{i:06d}.jpg", quality=95)
        counts[split] = n
    manifest = {
        "dataset": dataset,
        "size": size,
        "counts": counts,
        "bytes_on_disk": sum(p.stat().st_size for p in tmp.rglob("*.jpg")),
        "unpacked_bytes_per_rank": unpacked_bytes(size, n_train, n_test),
        "format": "JPEG, RGB, one folder per label",
    }
    store.write_json_atomic(tmp / MANIFEST, manifest)
    try:
        os.rename(tmp, out)  # a whole set appears at once; a concurrent maker's copy is dropped
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    check(out)
    return out


def check(path: Path) -> dict[str, Any]:
    """The set's manifest, after checking its files are all there."""
    if not (path / MANIFEST).is_file():
        raise FileNotFoundError(
            f"no Scenario B set at {path}: run `python -m run.vision.scenario_b prepare` "
            "(the sweep makes it for the embedded digits)"
        )
    try:
        manifest = store.read_json(path / MANIFEST)
        for split in SPLITS:
            have = sum(1 for _ in (path / split).rglob("*.jpg"))
            if have != manifest["counts"][split]:
                raise ValueError(
                    f"{have} {split} files, the manifest says {manifest['counts'][split]}"
                )
    except (ValueError, KeyError) as exc:
        raise ValueError(f"the Scenario B set at {path} is corrupt: {exc}") from exc
    return manifest


def files(path: Path, split: str) -> list[tuple[Path, int]]:
    """(file, label) in DALI's order: labels from the sorted folder names, files sorted."""
    base = path / split
    labels = sorted(d.name for d in base.iterdir() if d.is_dir())
    return [(f, i) for i, lab in enumerate(labels) for f in sorted((base / lab).glob("*.jpg"))]


def memory_check(spec: dict[str, Any], available: int) -> str:
    if spec["loader"] != "torch":
        return ""
    per_rank = unpacked_bytes(spec["image_size"], spec["train_images"], spec["test_images"])
    need = per_rank * spec["gpus"]
    if need <= available:
        return ""
    return (f"the DataLoader ranks would unpack {spec['gpus']} x {per_rank / 2**30:.1f} GiB = "
            f"{need / 2**30:.1f} GiB, the node has {available / 2**30:.1f} GiB available")  # fmt: skip


# ---------------------------------------------------------------- the DataLoader path
class Unpacked:
    def __init__(self, path: Path, split: str, dtype: Any) -> None:
        import torch
        from PIL import Image

        pairs = files(path, split)
        arrays = [np.asarray(Image.open(f).convert("RGB"), dtype=np.uint8) for f, _ in pairs]
        x = torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2).contiguous()
        self.images = x.to(torch.float32).div_(255.0)  # unpacked: 3 x H x W float32 per image
        self.labels = torch.tensor([lab for _, lab in pairs], dtype=torch.int64)
        self.dtype = dtype

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[Any, Any]:
        return ((self.images[i] - MEAN) / STD).to(self.dtype), self.labels[i]


# ---------------------------------------------------------------- the DALI path
class DaliLoader:
    """A DALI pipeline over one split, sharded by rank, yielding (x, y); `nhwc` hands on NCHW
    channels_last. `labels_on_gpu`: from the CPU the labels are a pageable tensor whose copy may
    wait for the device (O2's no-host-sync step)."""

    def __init__(self, path: Path, split: str, batch: int, rank: int, world: int,
                 device_id: int | None, nhwc: bool, shuffle: bool, seed: int,
                 labels_on_gpu: bool = False) -> None:  # fmt: skip
        try:
            from nvidia.dali import fn, pipeline_def, types
            from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy
        except ImportError as exc:
            raise ValueError(
                f"loader=dali needs NVIDIA DALI (nvidia-dali-cudaXX0): {exc}"
            ) from None

        @pipeline_def(
            batch_size=batch,
            device_id=device_id,
            seed=seed,
            num_threads=DALI_GPU_THREADS if device_id is not None else DALI_CPU_THREADS,
        )
        def pipe():  # noqa: ANN202
            jpegs, labels = fn.readers.file(file_root=str(path / split), shard_id=rank,
                                            num_shards=world, random_shuffle=shuffle,
                                            name="Reader")  # fmt: skip
            images = fn.decoders.image(jpegs, device="mixed" if device_id is not None else "cpu",
                                       output_type=types.RGB)  # fmt: skip
            images = fn.crop_mirror_normalize(
                images, dtype=types.FLOAT, output_layout="HWC" if nhwc else "CHW",
                mean=[255 * MEAN] * 3, std=[255 * STD] * 3,
            )  # fmt: skip
            if labels_on_gpu and device_id is not None:
                labels = labels.gpu()
            return images, labels

        p = pipe()
        p.build()
        self.nhwc = nhwc
        self.it = DALIGenericIterator([p], ["x", "y"], reader_name="Reader", auto_reset=True,
                                      last_batch_policy=LastBatchPolicy.PARTIAL)  # fmt: skip

    def __iter__(self):  # noqa: ANN204
        for out in self.it:
            x, y = out[0]["x"], out[0]["y"].reshape(-1).long()
            if self.nhwc:  # N,H,W,C in memory = an NCHW tensor in channels_last format
                x = x.permute(0, 3, 1, 2)
            yield x, y


@program()
def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare", help="make the set (from the digits or MNIST_DIR)")
    p.add_argument("--dataset", choices=("digits", "mnist"), default="digits")
    p.add_argument("--size", type=int, required=True)
    p.add_argument("--train", type=int, required=True)
    p.add_argument("--test", type=int, required=True)
    args = ap.parse_args(argv)
    try:
        out = prepare(digits.data_root(args.dataset), args.dataset, args.size, args.train,
                      args.test)  # fmt: skip
    except ValueError as exc:  # bad input, not a bug of ours
        raise UserError(str(exc)) from exc
    m = check(out)
    print(f"{out}: {m['counts']} images, {m['bytes_on_disk'] / 2**20:.1f} MiB on disk, "
          f"{m['unpacked_bytes_per_rank'] / 2**20:.1f} MiB unpacked per DataLoader rank")  # fmt: skip
    print(json.dumps(m))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The embedded offline data set: digit glyphs written in MNIST's own IDX format.

    python -m run.vision.digits --root data/digits --train 4096 --test 1024

28x28 digits in Pillow's own font (the same glyphs everywhere), varied by a seeded size, stroke,
rotation, shear, offset, blur and noise. Mildly on purpose: MobileNetV2 learns these to 87-98 %
from 1280 images in 2 epochs (smoke V3/V4/V7), where version 1's stronger variation stayed at
26-39 %. A set of another VERSION is made again. Laid out as torchvision expects MNIST
(`<root>/MNIST/raw/train-images-idx3-ubyte`, ...): torchvision.datasets.MNIST reads both alike.
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from run import settings
from run.program import program

SIDE = 28
# Bump whenever render() or make_split() changes what is drawn: sets of another version are redone.
VERSION = 2
VERSION_FILE = "digits-version"
FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


def data_root(dataset: str) -> Path:
    if dataset == "digits":
        return settings.value("DIGITS_DIR")
    return settings.value("MNIST_DIR")


def raw_dir(root: Path) -> Path:
    return Path(root) / "MNIST" / "raw"


def render(digit: int, rng: np.random.Generator) -> np.ndarray:
    big = 56  # draw at twice the size, then shrink: smoother strokes, like MNIST's anti-aliasing
    font = ImageFont.load_default(size=int(rng.integers(36, 42)))
    im = Image.new("L", (big, big), 0)
    draw = ImageDraw.Draw(im)
    stroke = int(rng.integers(1, 3))
    draw.text(
        (big / 2, big / 2),
        str(digit),
        fill=255,
        font=font,
        anchor="mm",
        stroke_width=stroke,
        stroke_fill=255,
    )
    angle = float(rng.uniform(-5, 5))
    shear = float(rng.uniform(-0.05, 0.05))
    dx, dy = rng.uniform(-0.5, 0.5, size=2)  # on the 56 px canvas: a quarter pixel at 28
    im = im.rotate(angle, resample=Image.BILINEAR, translate=(dx, dy))
    im = im.transform(im.size, Image.AFFINE, (1, shear, -shear * big / 2, 0, 1, 0), Image.BILINEAR)
    im = im.filter(ImageFilter.GaussianBlur(float(rng.uniform(0.0, 0.6))))
    im = im.resize((SIDE, SIDE), Image.BILINEAR)
    arr = np.asarray(im, dtype=np.float32)
    arr += rng.normal(0, 12, size=arr.shape)
    return np.clip(arr, 0, 255).astype(np.uint8)


def make_split(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, size=n).astype(np.uint8)
    images = np.stack([render(int(d), rng) for d in labels]) if n else np.zeros((0, SIDE, SIDE))
    return images.astype(np.uint8), labels


def write_idx(path: Path, array: np.ndarray) -> None:
    """IDX as MNIST uses it: magic (0, 0, dtype 0x08 = ubyte, ndim), big-endian dims, raw bytes."""
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(
        f">{array.ndim}I", *array.shape
    )
    tmp = path.with_suffix(f".{os.getpid()}.tmp")  # ranks may write the same set at once
    with open(tmp, "wb") as fh:
        fh.write(header)
        fh.write(np.ascontiguousarray(array, dtype=np.uint8).tobytes())
    os.replace(tmp, path)


def read_idx_count(path: Path) -> int:
    with open(path, "rb") as fh:
        head = fh.read(8)
    if len(head) < 8 or head[:2] != b"\0\0":
        raise ValueError(f"{path} is not an IDX file")
    return struct.unpack(">I", head[4:8])[0]


def existing_counts(root: Path) -> dict[str, int] | None:
    out = {}
    for split, (img, lab) in FILES.items():
        p_img, p_lab = raw_dir(root) / img, raw_dir(root) / lab
        if not (p_img.is_file() and p_lab.is_file()):
            return None
        out[split] = read_idx_count(p_img)
    return out


def written_version(root: Path) -> str | None:
    """The VERSION that wrote the set under root (None: a set of version 1)."""
    try:
        return (raw_dir(root) / VERSION_FILE).read_text().strip()
    except FileNotFoundError:
        return None


def generate(root: Path, n_train: int, n_test: int, seed: int = 1234) -> Path:
    """Write the data set unless one of this VERSION at least as large is there; raw_dir."""
    have = existing_counts(root)
    current = written_version(root) == str(VERSION)
    if have and current and have["train"] >= n_train and have["test"] >= n_test:
        return raw_dir(root)
    out = raw_dir(root)
    out.mkdir(parents=True, exist_ok=True)
    for split, n, s in (("train", n_train, seed), ("test", n_test, seed + 1)):
        images, labels = make_split(n, s)
        write_idx(out / FILES[split][0], images)
        write_idx(out / FILES[split][1], labels)
    marker = out / f"{VERSION_FILE}.{os.getpid()}.tmp"  # last: the set is complete
    marker.write_text(f"{VERSION}\n")
    os.replace(marker, out / VERSION_FILE)
    return out


@program()
def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--root", type=Path, default=Path("data/digits"))
    ap.add_argument("--train", type=int, default=4096)
    ap.add_argument("--test", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args(argv)
    out = generate(args.root, args.train, args.test, args.seed)
    print(f"digits: {existing_counts(args.root)} images in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

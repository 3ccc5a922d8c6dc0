#!/usr/bin/python3
"""Image-file data and its torchvision reference (tests/e2e/image_data_test.cpp).

  image_folder_data.py make --out DIR --size S
      DIR/folder: an ImageFolder of 24 images in 3 classes ("cat", "dog",
      "eel"): JPEGs and PNGs of several sizes, larger and smaller than 32x32,
      RGB, grey, with alpha and with a palette, made with PIL;
      DIR/reference: images.npy float32 (24, 3, 32, 32) and labels.npy, what
      torchvision's ImageFolder gives with Resize(S), CenterCrop(32) and
      ToTensor, in its order.
"""
import argparse
import os

import numpy as np
from PIL import Image
import torchvision
from torchvision import transforms

SIZES = [(40, 48), (32, 32), (20, 26), (64, 50), (33, 31), (100, 120), (31, 45), (28, 28)]
MODES = ["RGB", "RGB", "L", "RGBA", "P", "RGB", "RGB", "RGB"]


def make(out, size):
    rng = np.random.default_rng(1)
    folder = os.path.join(out, "folder")
    for c, name in enumerate(["cat", "dog", "eel"]):
        os.makedirs(os.path.join(folder, name), exist_ok=True)
        for k in range(8):
            h, w = SIZES[k]
            mode = MODES[(k + c) % len(MODES)]
            # Smooth images (a coarse grid upsampled) with noise, so JPEG keeps them apart.
            base = rng.integers(0, 256, (4, 4, 4), dtype=np.uint8)
            pixels = np.asarray(Image.fromarray(base, "RGBA").resize((w, h), Image.BILINEAR))
            pixels = np.clip(pixels.astype(int) + rng.integers(-20, 21, pixels.shape), 0, 255).astype(np.uint8)
            image = Image.fromarray(pixels, "RGBA").convert(mode) if mode != "P" else \
                Image.fromarray(pixels, "RGBA").convert("RGB").convert("P", palette=Image.ADAPTIVE, colors=64)
            jpeg = k % 2 == 0 and mode in ("RGB", "L")
            path = os.path.join(folder, name, "img%02d.%s" % (k, ("JPG" if k == 4 else "jpg") if jpeg else "png"))
            if jpeg:
                image.save(path, quality=90)
            else:
                image.save(path)
        # Files that are not images are left out.
        with open(os.path.join(folder, name, "notes.txt"), "w") as f:
            f.write("not an image\n")
    transform = transforms.Compose([transforms.Resize(size), transforms.CenterCrop(32), transforms.ToTensor()])
    data = torchvision.datasets.ImageFolder(folder, transform=transform)
    images = np.stack([np.asarray(x) for x, _ in data]).astype(np.float32)
    labels = np.array([y for _, y in data], dtype=np.int32)
    os.makedirs(os.path.join(out, "reference"), exist_ok=True)
    np.save(os.path.join(out, "reference", "images.npy"), images)
    np.save(os.path.join(out, "reference", "labels.npy"), labels)
    print("made %d images in %d classes" % (len(labels), len(data.classes)))


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("--out", required=True)
    m.add_argument("--size", type=int, required=True)
    args = parser.parse_args()
    make(args.out, args.size)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""A real data set trained to accuracy (tests/e2e/digits_accuracy_test.cpp):
scikit-learn's handwritten digits (1,797 real 8x8 images in 10 classes,
Debian's python3-sklearn), a small CNN, and the same recipe in PyTorch.

  digits_accuracy.py export --out DIR
      DIR/train and DIR/val (1,437 and 360 samples, split by a fixed
      permutation): images.npy uint8 (N, 8, 8, 1), the 0..16 grey levels
      times 15, and labels.npy int32; DIR/model.yaml and DIR/init (the --load
      folder) from tools/mplan_export.py; prints "mean M std S", the training
      images' pixel statistics after ToTensor's scaling (for --mean, --std)
  digits_accuracy.py train --dir DIR --epochs E
      trains the recipe in PyTorch from DIR/init's module and prints
      "torch val: loss L top1 T% top5 F%"

The recipe: batch 32, SGD (lr 0.05, momentum 0.9, weight decay 5e-4),
cosine annealing over every update, epochs in file order with the last
partial batch dropped, no augmentation: what `train --epochs E --lr-schedule
cosine,steps=E*44 --mean M --std S` runs."""
import argparse
import os
import subprocess
import sys

import numpy as np
import torch
from torch import nn

BATCH = 32
LR, MOMENTUM, WEIGHT_DECAY = 0.05, 0.9, 5e-4
TRAIN = 1437
HERE = os.path.dirname(os.path.abspath(__file__))


def make_net():
    torch.manual_seed(5)
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 4 * 4, 64), nn.ReLU(), nn.Linear(64, 10))


def split():
    from sklearn.datasets import load_digits
    digits = load_digits()
    order = np.random.default_rng(0).permutation(len(digits.target))
    images = (digits.images[order] * 15).astype(np.uint8)[..., None]  # (N, 8, 8, 1)
    labels = digits.target[order].astype(np.int32)
    return (images[:TRAIN], labels[:TRAIN]), (images[TRAIN:], labels[TRAIN:])


def as_input(images, mean, std):
    """ToTensor (the byte over 255, NHWC to NCHW), then Normalize."""
    x = torch.tensor(images).permute(0, 3, 1, 2).float() / 255.0
    return (x - mean) / std


def statistics(images):
    x = torch.tensor(images).float() / 255.0
    return float(x.mean()), float(x.std())


def export(out):
    train, val = split()
    for name, (images, labels) in (("train", train), ("val", val)):
        os.makedirs(os.path.join(out, name), exist_ok=True)
        np.save(os.path.join(out, name, "images.npy"), images)
        np.save(os.path.join(out, name, "labels.npy"), labels)
    subprocess.run([sys.executable, os.path.join(HERE, "..", "..", "tools", "mplan_export.py"),
                    __file__ + ":make_net", "--input", "1,8,8", "--batch", str(BATCH), "--lr", str(LR),
                    "--momentum", str(MOMENTUM), "--weight-decay", str(WEIGHT_DECAY), "--name", "digits_cnn",
                    "-o", os.path.join(out, "model.yaml"), "--weights", os.path.join(out, "init")], check=True)
    mean, std = statistics(train[0])
    print("mean %.9g std %.9g" % (mean, std))


def train(directory, epochs):
    (images, labels), (val_images, val_labels) = split()
    mean, std = statistics(images)
    net = make_net()
    steps_per_epoch = len(labels) // BATCH
    optimizer = torch.optim.SGD(net.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs * steps_per_epoch)
    x, y = as_input(images, mean, std), torch.tensor(labels).long()
    for _ in range(epochs):
        for s in range(steps_per_epoch):
            batch = slice(s * BATCH, (s + 1) * BATCH)
            optimizer.zero_grad()
            nn.functional.cross_entropy(net(x[batch]), y[batch]).backward()
            optimizer.step()
            schedule.step()
    net.eval()
    with torch.no_grad():
        logits = net(as_input(val_images, mean, std))
        target = torch.tensor(val_labels).long()
        loss = nn.functional.cross_entropy(logits, target).item()
        top5 = logits.topk(5, dim=1).indices
        top1 = (top5[:, 0] == target).float().mean().item()
        top5 = (top5 == target[:, None]).any(dim=1).float().mean().item()
    print("torch val: loss %.4f top1 %.2f%% top5 %.2f%%" % (loss, 100 * top1, 100 * top5))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export")
    e.add_argument("--out", required=True)
    t = sub.add_parser("train")
    t.add_argument("--dir", required=True)
    t.add_argument("--epochs", type=int, required=True)
    args = parser.parse_args()
    if args.command == "export":
        export(args.out)
    else:
        train(args.dir, args.epochs)


if __name__ == "__main__":
    main()

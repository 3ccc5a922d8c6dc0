#!/usr/bin/python3
"""Small PyTorch models of the vision-model op families, for the numerics
tests (tests/e2e/vision_numerics_test.cpp): each is exported with
tools/mplan_export.py, compiled and trained by the generated CPU program, and
trained here in PyTorch from the same weights on the same data.

  vision_models.py export --family F --out DIR
      writes DIR/model.yaml, DIR/init/ (the module's initial weights, the
      program's --load folder), DIR/names.json (PyTorch's tensor names ->
      mplan's), DIR/data/images.npy and labels.npy
  vision_models.py train --family F --dir DIR --steps K --sub-batches 4,4
      trains K steps of SGD exactly as the program's semantics say
      (docs/generated-program.md: the loss averaged over the batch, gradients
      accumulated over the sub-batches, batch-norm statistics per sub-batch),
      writes the weights under mplan's names to DIR/torch/ and prints
      "step N: loss X" per step.

Families (each module's layers are torchvision's building blocks, small):
  mobile    depthwise, grouped and dilated convolutions, hardswish,
            hardsigmoid, SiLU, sigmoid, tanh-GELU, ReLU6, squeeze-and-excitation
            (a product with a factor per channel), adaptive average pooling to
            3x3 and to 1x1, ShuffleNet's channel shuffle, chunk and concat
  convnext  ConvNeXt's block: patchify stem, layer norm over channels
            (LayerNorm2d), depthwise 7x7, the channels-last MLP (linear over
            channels, erf-GELU), layer scale
  vit       ViT: patch embedding, class token, position embedding, layer norm
            over features, multi-head self-attention, MLP, the class token's
            head, and a hand-written attention of matmul, softmax, matmul
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import mplan_export  # noqa: E402

BATCH, CLASSES, SAMPLES = 8, 5, 24
INPUT = [3, 16, 16]


class SqueezeExcitation(nn.Module):  # torchvision.ops.SqueezeExcitation, as MobileNet v3 uses it
    def __init__(self, channels, squeezed):
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeezed, 1)
        self.fc2 = nn.Conv2d(squeezed, channels, 1)
        self.activation = nn.SiLU()
        self.scale_activation = nn.Hardsigmoid()

    def forward(self, x):
        scale = self.scale_activation(self.fc2(self.activation(self.fc1(self.avgpool(x)))))
        return scale * x


def channel_shuffle(x, groups):  # torchvision.models.shufflenetv2.channel_shuffle
    batchsize, num_channels, height, width = x.size()
    x = x.view(batchsize, groups, num_channels // groups, height, width)
    x = torch.transpose(x, 1, 2).contiguous()
    return x.view(batchsize, -1, height, width)


class Mobile(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.Hardswish())
        self.depthwise = nn.Sequential(nn.Conv2d(8, 8, 3, 1, 1, groups=8, bias=False), nn.BatchNorm2d(8), nn.ReLU6())
        self.se = SqueezeExcitation(8, 4)
        self.dilated = nn.Conv2d(8, 8, 3, padding=2, dilation=2)
        self.sigmoid = nn.Sigmoid()
        self.grouped = nn.Conv2d(8, 12, 3, padding=1, groups=2)
        self.gelu = nn.GELU(approximate="tanh")
        self.branch = nn.Sequential(nn.Conv2d(6, 6, 1), nn.BatchNorm2d(6), nn.ReLU())
        self.pool = nn.AdaptiveAvgPool2d((3, 3))
        self.fc = nn.Linear(12 * 9, CLASSES)

    def forward(self, x):
        x = self.se(self.depthwise(self.stem(x)))
        x = self.gelu(self.grouped(self.sigmoid(self.dilated(x)) * x))
        x1, x2 = x.chunk(2, dim=1)
        x = channel_shuffle(torch.cat((x1, self.branch(x2)), dim=1), 2)
        return self.fc(torch.flatten(self.pool(x), 1))


class LayerNorm2d(nn.LayerNorm):  # torchvision.models.convnext.LayerNorm2d
    def forward(self, x):
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class Permute(nn.Module):  # torchvision.ops.misc.Permute
    def __init__(self, dims):
        super().__init__()
        self.dims = dims

    def forward(self, x):
        return torch.permute(x, self.dims)


class CNBlock(nn.Module):  # torchvision.models.convnext.CNBlock (stochastic depth 0)
    def __init__(self, dim):
        super().__init__()
        self.block = nn.Sequential(nn.Conv2d(dim, dim, 7, padding=3, groups=dim), Permute([0, 2, 3, 1]),
                                   nn.LayerNorm(dim, eps=1e-6), nn.Linear(dim, 4 * dim), nn.GELU(),
                                   nn.Linear(4 * dim, dim), Permute([0, 3, 1, 2]))
        self.layer_scale = nn.Parameter(torch.rand(dim, 1, 1) + 0.5)

    def forward(self, x):
        return self.layer_scale * self.block(x) + x


class ConvNext(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 4, 4), LayerNorm2d(8, eps=1e-6))
        self.block = CNBlock(8)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.norm = LayerNorm2d(8, eps=1e-6)
        self.head = nn.Linear(8, CLASSES)

    def forward(self, x):
        x = self.norm(self.pool(self.block(self.stem(x))))
        return self.head(torch.flatten(x, 1))


class EncoderBlock(nn.Module):  # torchvision.models.vision_transformer.EncoderBlock (dropout 0)
    def __init__(self, dim, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim, eps=1e-6)
        self.self_attention = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ln_2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        y = self.ln_1(x)
        y, _ = self.self_attention(y, y, y, need_weights=False)
        x = x + y
        return x + self.mlp(self.ln_2(x))


class Vit(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.conv_proj = nn.Conv2d(3, dim, 4, 4)
        self.class_token = nn.Parameter(torch.randn(1, 1, dim) * 0.1)
        self.pos_embedding = nn.Parameter(torch.randn(1, 17, dim) * 0.02)
        self.block = EncoderBlock(dim, 2)
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.ln = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, CLASSES)

    def forward(self, x):
        n = x.shape[0]
        x = self.conv_proj(x).reshape(n, 16, 16).permute(0, 2, 1)
        x = torch.cat([self.class_token.expand(n, -1, -1), x], dim=1) + self.pos_embedding
        x = self.block(x)
        # One more attention, written out: softmax(q @ k^T) @ v.
        p = torch.softmax(torch.matmul(self.q(x), self.k(x).transpose(1, 2)), dim=-1)
        x = x + torch.matmul(p, self.v(x))
        return self.head(self.ln(x)[:, 0])


FAMILIES = {"mobile": Mobile, "convnext": ConvNext, "vit": Vit}


def make(family):
    torch.manual_seed(14)
    return FAMILIES[family]()


def export(family, out):
    module = make(family)
    text, weights, names = mplan_export.export(module, INPUT, BATCH, name=family)
    os.makedirs(os.path.join(out, "init"), exist_ok=True)
    os.makedirs(os.path.join(out, "data"), exist_ok=True)
    with open(os.path.join(out, "model.yaml"), "w") as f:
        f.write(text)
    for key, array in weights.items():
        np.save(os.path.join(out, "init", key + ".npy"), array)
    with open(os.path.join(out, "names.json"), "w") as f:
        json.dump(names, f, indent=1, sort_keys=True)
    rng = np.random.default_rng(3)
    np.save(os.path.join(out, "data", "images.npy"), rng.uniform(-1, 1, size=[SAMPLES] + INPUT).astype(np.float32))
    np.save(os.path.join(out, "data", "labels.npy"), rng.integers(0, CLASSES, size=SAMPLES).astype(np.int32))


def train(family, d, steps, subs):
    torch.set_num_threads(1)
    module = make(family)
    module.train()
    names = json.load(open(os.path.join(d, "names.json")))
    images = np.load(os.path.join(d, "data", "images.npy"))
    labels = np.load(os.path.join(d, "data", "labels.npy"))
    assert sum(subs) == BATCH
    sgd = torch.optim.SGD(module.parameters(), lr=0.01, momentum=0.9)
    for step in range(steps):
        sgd.zero_grad()
        first, total = 0, 0.0
        for n in subs:
            idx = [(step * BATCH + first + i) % len(labels) for i in range(n)]
            logits = module(torch.tensor(images[idx]))
            loss = F.cross_entropy(logits, torch.tensor(labels[idx]).long(), reduction="sum") / BATCH
            loss.backward()
            total += loss.item()
            first += n
        sgd.step()
        print("step %d: loss %.6f" % (step + 1, total))
    os.makedirs(os.path.join(d, "torch"), exist_ok=True)
    state = dict(module.state_dict())
    for name, key in names.items():
        t = state[name] if name in state else dict(module.named_parameters())[name]
        shape = np.load(os.path.join(d, "init", key + ".npy")).shape
        # Tensors exported in another shape (a linear layer as a 1x1 conv) keep their elements' order.
        np.save(os.path.join(d, "torch", key + ".npy"), t.detach().numpy().astype(np.float32).reshape(shape))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["export", "train"])
    parser.add_argument("--family", required=True, choices=sorted(FAMILIES))
    parser.add_argument("--out")
    parser.add_argument("--dir")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--sub-batches", default=str(BATCH))
    a = parser.parse_args()
    if a.mode == "export":
        export(a.family, a.out)
    else:
        train(a.family, a.dir, a.steps, [int(s) for s in a.sub_batches.split(",")])


if __name__ == "__main__":
    main()

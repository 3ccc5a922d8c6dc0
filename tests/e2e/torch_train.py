#!/usr/bin/python3
"""PyTorch reference for the end-to-end tests (tests/e2e/torch_test.cpp).

  torch_train.py data  --model M.yaml --samples N --seed S --out DIR
      writes DIR/images.npy (N, C, H, W) float32 and DIR/labels.npy (N,) int32
  torch_train.py train --model M.yaml --init DIR --data DIR --steps K --seed S
                       --sub-batches 16,16 --out DIR
      loads the generated program's initial weights (its --save at step 0),
      trains K steps of SGD exactly as the program's semantics say
      (docs/generated-program.md): the loss averaged over the full batch, the
      gradients accumulated over the sub-batches, batch-norm statistics per
      sub-batch, dropout masks from (seed, step, global sample index), and
      writes the weights in the program's format to --out.

Only flat models (no blocks/repeat) are supported: the examples the tests use.
"""
import argparse
import os

import numpy as np
import torch
import torch.nn.functional as F
import yaml

M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def mix64(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
    return z ^ (z >> np.uint64(31))


def dropout_uniform(seed, step, samples, elements):
    """runtime/cpu/dropout.cpp's dropout_uniform over a (samples, elements) grid."""
    with np.errstate(over="ignore"):
        h = mix64(np.uint64(seed) + np.uint64(0x9e3779b97f4a7c15))
        h = mix64(h ^ (np.uint64(step) * np.uint64(0xd1b54a32d192ed03)))
        s = np.asarray(samples, dtype=np.uint64)[:, None]
        e = np.arange(elements, dtype=np.uint64)[None, :]
        h = mix64(h ^ (s * np.uint64(0xabc98388fb8fac03)))
        h = mix64(h ^ (e * np.uint64(0x8cb92ba72f3d8dd7)))
    return (h >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0)


def pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def load_layers(path):
    with open(path) as f:
        doc = yaml.safe_load(f)
    layers = []
    prev = "input"
    for i, spec in enumerate(doc["layers"]):
        name = spec.get("name", "%s_%d" % (spec["op"], i))
        ins = spec.get("in", prev)
        ins = [ins] if isinstance(ins, str) else list(ins)
        layers.append((name, spec, ins))
        prev = name
    return doc, layers


class Net:
    def __init__(self, doc, layers, init_dir):
        self.doc, self.layers = doc, layers
        self.params, self.buffers = {}, {}
        for name, spec, _ in layers:
            op = spec["op"]
            if op in ("conv", "linear", "batchnorm"):
                for part in ("weight", "bias"):
                    path = os.path.join(init_dir, "%s.%s.npy" % (name, part))
                    if os.path.exists(path):
                        self.params["%s.%s" % (name, part)] = torch.tensor(np.load(path), requires_grad=True)
            if op == "batchnorm":
                for part in ("running_mean", "running_var"):
                    self.buffers["%s.%s" % (name, part)] = torch.tensor(
                        np.load(os.path.join(init_dir, "%s.%s.npy" % (name, part))))

    def forward(self, x, labels, batch, seed, step, first_sample):
        values = {"input": x}
        n = x.shape[0]
        for name, spec, ins in self.layers:
            op = spec["op"]
            a = values[ins[0]]
            p = lambda part: self.params.get("%s.%s" % (name, part))
            if op == "conv":
                y = F.conv2d(a, p("weight"), p("bias"), stride=pair(spec.get("stride", 1)),
                             padding=pair(spec.get("pad", 0)), groups=spec.get("groups", 1))
            elif op == "linear":
                y = F.linear(a.reshape(n, -1), p("weight"), p("bias"))
            elif op == "relu":
                y = F.relu(a)
            elif op == "pool":
                k = pair(spec["kernel"])
                s = pair(spec.get("stride", spec["kernel"]))
                pad = pair(spec.get("pad", 0))
                ceil = spec.get("ceil_mode", False)
                if spec.get("mode", "max") == "max":
                    y = F.max_pool2d(a, k, s, pad, ceil_mode=ceil)
                else:
                    y = F.avg_pool2d(a, k, s, pad, ceil_mode=ceil, count_include_pad=True)
            elif op == "global_avgpool":
                y = a.mean(dim=(2, 3), keepdim=True)
            elif op == "batchnorm":
                y = F.batch_norm(a, self.buffers[name + ".running_mean"], self.buffers[name + ".running_var"],
                                 p("weight"), p("bias"), training=True, momentum=float(spec.get("momentum", 0.1)),
                                 eps=float(spec.get("eps", 1e-5)))
            elif op == "lrn":
                y = F.local_response_norm(a, spec.get("size", 5), float(spec.get("alpha", 1e-4)), float(spec.get("beta", 0.75)),
                                          float(spec.get("k", 2.0)))
            elif op == "dropout":
                prob = np.float32(float(spec.get("p", 0.5)))
                flat = a.reshape(n, -1)
                u = dropout_uniform(seed, step, np.arange(first_sample, first_sample + n), flat.shape[1])
                keep = torch.tensor((u >= prob).astype(np.float32))
                y = (flat * keep * (1.0 / (1.0 - float(prob)))).reshape(a.shape)
            elif op == "add":
                y = values[ins[0]]
                for other in ins[1:]:
                    y = y + values[other]
            elif op == "concat":
                y = torch.cat([values[i] for i in ins], dim=1)
            elif op == "flatten":
                y = a.reshape(n, -1)
            elif op == "softmax_xent":
                # Summed over the sub-batch, divided by the full batch: the mean over the batch.
                y = F.cross_entropy(a.reshape(n, -1), labels, reduction="sum") / batch
            else:
                raise SystemExit("torch_train.py: op %s is not supported" % op)
            values[name] = y
        return values[self.layers[-1][0]]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["data", "train"])
    parser.add_argument("--model", required=True)
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--init")
    parser.add_argument("--data")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--sub-batches")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    doc, layers = load_layers(args.model)
    os.makedirs(args.out, exist_ok=True)
    if args.mode == "data":
        rng = np.random.default_rng(args.seed)
        shape = [args.samples] + list(doc["input"])
        np.save(os.path.join(args.out, "images.npy"), rng.uniform(-1, 1, size=shape).astype(np.float32))
        np.save(os.path.join(args.out, "labels.npy"),
                rng.integers(0, doc["classes"], size=args.samples).astype(np.int32))
        return
    torch.set_num_threads(1)
    images = np.load(os.path.join(args.data, "images.npy"))
    labels = np.load(os.path.join(args.data, "labels.npy"))
    batch = int(doc["batch"])
    subs = [int(s) for s in args.sub_batches.split(",")]
    assert sum(subs) == batch
    net = Net(doc, layers, args.init)
    opt = doc.get("optimizer", {})
    # PyYAML reads "5e-4" (no dot) as a string: numbers go through float().
    sgd = torch.optim.SGD(list(net.params.values()), lr=float(opt.get("lr", 0.01)),
                          momentum=float(opt.get("momentum", 0.9)), weight_decay=float(opt.get("weight_decay", 0.0)))
    for step in range(args.steps):
        sgd.zero_grad()
        first = 0
        for n in subs:
            idx = [(step * batch + first + i) % len(labels) for i in range(n)]
            x = torch.tensor(images[idx])
            y = torch.tensor(labels[idx]).long()
            loss = net.forward(x, y, batch, args.seed, step, first)
            loss.backward()
            first += n
        sgd.step()
    for key, value in list(net.params.items()) + list(net.buffers.items()):
        np.save(os.path.join(args.out, key + ".npy"), value.detach().numpy().astype(np.float32))
    for key, value in net.params.items():
        buf = sgd.state[value].get("momentum_buffer")
        if buf is not None:
            np.save(os.path.join(args.out, key + ".momentum.npy"), buf.numpy().astype(np.float32))


if __name__ == "__main__":
    main()

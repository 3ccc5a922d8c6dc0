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
      --precision picks the arithmetic:
        fp32             float32 (the default)
        fp64             float64
        bf16-autocast    PyTorch's own CPU autocast in bfloat16 (torch.autocast)
        bf16, fp16       mplan's 16-bit semantics emulated in float64
                         (docs/generated-program.md, "16-bit programs"): the
                         values autocast keeps in 16 bits, and their gradients,
                         rounded to the type; fp16 with GradScaler's dynamic
                         loss scaling (--loss-scale, --growth-interval)

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


class Round(torch.autograd.Function):
    """A value autocast keeps in 16 bits: rounded to the type, and so is its gradient."""

    @staticmethod
    def forward(ctx, x, dtype):
        ctx.dtype = dtype
        return x.to(dtype).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        return g.to(ctx.dtype).to(g.dtype), None


# The ops autocast runs in 16 bits (ops/precision.h, OpSpec::autocast low_precision).
SIXTEEN_BIT_OPS = ("conv", "linear")


class Net:
    def __init__(self, doc, layers, init_dir, dtype=torch.float32, emulate=None, autocast=False):
        self.doc, self.layers = doc, layers
        self.dtype, self.emulate, self.autocast = dtype, emulate, autocast
        self.params, self.buffers = {}, {}
        for name, spec, _ in layers:
            op = spec["op"]
            if op in ("conv", "linear", "batchnorm"):
                for part in ("weight", "bias"):
                    path = os.path.join(init_dir, "%s.%s.npy" % (name, part))
                    if os.path.exists(path):
                        self.params["%s.%s" % (name, part)] = torch.tensor(np.load(path), dtype=dtype,
                                                                          requires_grad=True)
            if op == "batchnorm":
                for part in ("running_mean", "running_var"):
                    self.buffers["%s.%s" % (name, part)] = torch.tensor(
                        np.load(os.path.join(init_dir, "%s.%s.npy" % (name, part))), dtype=dtype)

    def forward(self, x, labels, batch, seed, step, first_sample):
        if self.autocast:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return self.forward_layers(x, labels, batch, seed, step, first_sample).float()
        return self.forward_layers(x.to(self.dtype), labels, batch, seed, step, first_sample)

    def forward_layers(self, x, labels, batch, seed, step, first_sample):
        values = {"input": x}
        sixteen = {"input": False}  # emulated: whether the value is kept in 16 bits
        n = x.shape[0]
        low = self.emulate
        for name, spec, ins in self.layers:
            op = spec["op"]
            if low is not None and op in SIXTEEN_BIT_OPS:
                # A 16-bit op: its inputs and weights cast to 16 bits.
                for i in ins:
                    if not sixteen[i]:
                        values[i] = Round.apply(values[i], low)
                        sixteen[i] = True
            a = values[ins[0]]
            if low is not None and op in SIXTEEN_BIT_OPS:
                p = lambda part: (None if self.params.get("%s.%s" % (name, part)) is None
                                  else Round.apply(self.params["%s.%s" % (name, part)], low))
            else:
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
                keep = torch.tensor((u >= prob).astype(np.float32)).to(flat.dtype)
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
                y = F.cross_entropy(a.reshape(n, -1), labels, reduction="sum",
                                    label_smoothing=float(spec.get("label_smoothing", 0.0))) / batch
            else:
                raise SystemExit("torch_train.py: op %s is not supported" % op)
            # Emulated 16 bits: a 16-bit op's result, and an element-wise op's
            # of 16-bit inputs, are kept in 16 bits; the loss is float32.
            kept = low is not None and op != "softmax_xent" and (
                op in SIXTEEN_BIT_OPS or all(sixteen[i] for i in ins))
            if kept:
                y = Round.apply(y, low)
            sixteen[name] = kept
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
    parser.add_argument("--precision", default="fp32", choices=["fp32", "fp64", "bf16-autocast", "bf16", "fp16"])
    parser.add_argument("--loss-scale", type=float, default=65536.0)
    parser.add_argument("--growth-interval", type=int, default=2000)
    parser.add_argument("--clip-grad-norm", type=float, default=0.0)
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
    emulate = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision)
    dtype = torch.float64 if args.precision in ("fp64", "bf16", "fp16") else torch.float32
    net = Net(doc, layers, args.init, dtype, emulate, autocast=args.precision == "bf16-autocast")
    opt = doc.get("optimizer", {})
    # PyYAML reads "5e-4" (no dot) as a string: numbers go through float().
    # Parameter groups: biases and normalisation layers' parameters without
    # weight decay where the optimizer's no_weight_decay says so.
    excluded = set(opt.get("no_weight_decay", []))
    norm_layers = {name for name, spec, _ in layers if spec["op"] in ("batchnorm", "layernorm")}
    decayed, undecayed = [], []
    for key, value in net.params.items():
        layer, part = key.rsplit(".", 1)
        skip = ("bias" in excluded and part == "bias") or ("norm" in excluded and layer in norm_layers)
        (undecayed if skip else decayed).append(value)
    groups = [{"params": decayed}] + ([{"params": undecayed, "weight_decay": 0.0}] if undecayed else [])
    if opt.get("kind", "sgd") == "adamw":
        betas = [float(b) for b in opt.get("betas", [0.9, 0.999])]
        sgd = torch.optim.AdamW(groups, lr=float(opt.get("lr", 1e-3)), betas=tuple(betas),
                                eps=float(opt.get("eps", 1e-8)), weight_decay=float(opt.get("weight_decay", 1e-2)))
    else:
        sgd = torch.optim.SGD(groups, lr=float(opt.get("lr", 0.01)), momentum=float(opt.get("momentum", 0.9)),
                              weight_decay=float(opt.get("weight_decay", 0.0)),
                              nesterov=bool(opt.get("nesterov", False)))
    # fp16: torch.cuda.amp.GradScaler's dynamic loss scaling, step by step.
    scaling = args.precision == "fp16"
    scale, tracker = args.loss_scale, 0
    for step in range(args.steps):
        sgd.zero_grad()
        first = 0
        for n in subs:
            idx = [(step * batch + first + i) % len(labels) for i in range(n)]
            x = torch.tensor(images[idx])
            y = torch.tensor(labels[idx]).long()
            loss = net.forward(x, y, batch, args.seed, step, first)
            (loss * scale if scaling else loss).backward()
            first += n
        if scaling:
            inverse = 1.0 / scale
            finite = True
            for value in net.params.values():
                value.grad.mul_(inverse)
                finite = finite and bool(torch.isfinite(value.grad).all())
            if finite:
                if args.clip_grad_norm > 0:
                    torch.nn.utils.clip_grad_norm_(list(net.params.values()), args.clip_grad_norm)
                sgd.step()
                tracker += 1
                if tracker == args.growth_interval:
                    scale, tracker = scale * 2.0, 0
            else:
                scale, tracker = scale * 0.5, 0
            print("step %d: loss scale after %g%s" % (step + 1, scale, "" if finite else " (update skipped)"))
        else:
            if args.clip_grad_norm > 0:
                norm = torch.nn.utils.clip_grad_norm_(list(net.params.values()), args.clip_grad_norm)
                print("step %d: gradient norm %.6g" % (step + 1, float(norm)))
            sgd.step()
    for key, value in list(net.params.items()) + list(net.buffers.items()):
        np.save(os.path.join(args.out, key + ".npy"), value.detach().numpy().astype(np.float32))
    for key, value in net.params.items():
        for state, suffix in (("momentum_buffer", "momentum"), ("exp_avg", "exp_avg"), ("exp_avg_sq", "exp_avg_sq")):
            buf = sgd.state[value].get(state)
            if buf is not None:
                np.save(os.path.join(args.out, key + "." + suffix + ".npy"), buf.numpy().astype(np.float32))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""PyTorch reference for tests/runtime/vision_ops_test.cpp.

Usage: vision_reference.py DIR. Reads the inputs the test wrote to DIR as .npy
files, runs the vision-model ops in PyTorch (float64) and writes the results
as ref_<name>.npy. The op parameters here must match the test's.
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F


def main(d):
    def load(name, grad=True):
        t = torch.from_numpy(np.load(os.path.join(d, name + ".npy")).astype(np.float64))
        return t.requires_grad_() if grad else t

    def save(name, t):
        np.save(os.path.join(d, "ref_" + name + ".npy"), t.detach().numpy().astype(np.float32))

    # Activations on act_x with gradient act_dy.
    activations = {
        "hardswish": F.hardswish,
        "hardsigmoid": F.hardsigmoid,
        "silu": F.silu,
        "sigmoid": torch.sigmoid,
        "gelu": F.gelu,
        "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
        "clip": lambda x: F.hardtanh(x, 0.0, 6.0),
    }
    for name, fn in activations.items():
        x = load("act_x")
        y = fn(x)
        y.backward(load("act_dy", False))
        save(name + "_y", y)
        save(name + "_dx", x.grad)

    # channel_mul: x (2, 3, 4) times s (2, 3) per sample, and times a shared s (3).
    for case, shape in (("cmul", (2, 3, 1)), ("cscale", (1, 3, 1))):
        x = load(case + "_x")
        s = load(case + "_s")
        y = x * s.reshape(shape)
        y.backward(load(case + "_dy", False))
        save(case + "_y", y)
        save(case + "_dx", x.grad)
        save(case + "_ds", s.grad)

    # adaptive average pooling of (2, 3, 7, 5) to 3x4 and to 9x2.
    for case, size in (("apool_a", (3, 4)), ("apool_b", (9, 2))):
        x = load("apool_x")
        y = F.adaptive_avg_pool2d(x, size)
        y.backward(load(case + "_dy", False))
        save(case + "_y", y)
        save(case + "_dx", x.grad)

    # channel shuffle of (2, 6, 5) in 3 groups (ShuffleNet's view, transpose, view).
    x = load("shuffle_x")
    y = x.view(2, 3, 2, 5).transpose(1, 2).reshape(2, 6, 5)
    y.backward(load("shuffle_dy", False))
    save("shuffle_y", y)
    save("shuffle_dx", x.grad)

    # slice of axis 1 (per-sample axis 0) of (2, 6, 5): channels 1 to 3.
    x = load("slice_x")
    y = x[:, 1:4]
    y.backward(load("slice_dy", False))
    save("slice_y", y)
    save("slice_dx", x.grad)

    # layer norm over the channels of (2, 5, 3, 4), eps 1e-6, and over the features of (2, 7, 6), eps 1e-5.
    x, w, b = load("lnc_x"), load("lnc_w"), load("lnc_b")
    y = F.layer_norm(x.permute(0, 2, 3, 1), (5,), w, b, 1e-6).permute(0, 3, 1, 2)
    y.backward(load("lnc_dy", False))
    for name, t in (("y", y), ("dx", x.grad), ("dw", w.grad), ("db", b.grad)):
        save("lnc_" + name, t)
    x, w, b = load("lnf_x"), load("lnf_w"), load("lnf_b")
    y = F.layer_norm(x, (6,), w, b, 1e-5)
    y.backward(load("lnf_dy", False))
    for name, t in (("y", y), ("dx", x.grad), ("dw", w.grad), ("db", b.grad)):
        save("lnf_" + name, t)

    # matmul: a (6, 4, 5) @ b (6, 5, 3), and a @ bt^T with bt (6, 3, 5).
    for case, transpose in (("mm", False), ("mmt", True)):
        a, b = load(case + "_a"), load(case + "_b")
        y = a @ (b.transpose(1, 2) if transpose else b)
        y.backward(load(case + "_dy", False))
        save(case + "_y", y)
        save(case + "_da", a.grad)
        save(case + "_db", b.grad)

    # softmax over the last axis of (6, 7).
    x = load("softmax_x")
    y = torch.softmax(x, -1)
    y.backward(load("softmax_dy", False))
    save("softmax_y", y)
    save("softmax_dx", x.grad)

    # attention, packed: qkv (2, 5, 24), 2 heads of 4; separate: q (2, 3, 8), k and v (2, 6, 8), 4 heads of 2.
    def attend(q, k, v, heads):
        n, tq, dim = q.shape
        tk = k.shape[1]
        hd = dim // heads
        qh = q.reshape(n, tq, heads, hd).transpose(1, 2)
        kh = k.reshape(n, tk, heads, hd).transpose(1, 2)
        vh = v.reshape(n, tk, heads, hd).transpose(1, 2)
        p = torch.softmax(qh @ kh.transpose(-1, -2) / math.sqrt(hd), -1)
        return (p @ vh).transpose(1, 2).reshape(n, tq, dim), p

    qkv = load("attp_qkv")
    y, p = attend(qkv[..., 0:8], qkv[..., 8:16], qkv[..., 16:24], 2)
    y.backward(load("attp_dy", False))
    save("attp_y", y)
    save("attp_p", p)
    save("attp_dqkv", qkv.grad)
    q, k, v = load("atts_q"), load("atts_k"), load("atts_v")
    y, p = attend(q, k, v, 4)
    y.backward(load("atts_dy", False))
    save("atts_y", y)
    save("atts_dq", q.grad)
    save("atts_dk", k.grad)
    save("atts_dv", v.grad)

    # patch embedding: x (2, 3, 9, 8), patch 4 (a 2x2 grid, the last row and column unused), 5 features.
    x, w, b = load("patch_x"), load("patch_w"), load("patch_b")
    y = F.conv2d(x, w, b, stride=4).flatten(2).transpose(1, 2)
    y.backward(load("patch_dy", False))
    for name, t in (("y", y), ("dx", x.grad), ("dw", w.grad), ("db", b.grad)):
        save("patch_" + name, t)

    # class token before x (2, 4, 3); position embedding p (1, 5, 3) added to (2, 5, 3).
    x, token = load("token_x"), load("token_t")
    y = torch.cat([token.expand(2, -1, -1), x], dim=1)
    y.backward(load("token_dy", False))
    save("token_y", y)
    save("token_dx", x.grad)
    save("token_dt", token.grad)
    x, p = load("pos_x"), load("pos_p")
    y = x + p
    y.backward(load("pos_dy", False))
    save("pos_y", y)
    save("pos_dp", p.grad)

    # convolutions: dilated (groups 2, dilation 2, pad 2), depthwise (stride 2), depthwise x2 (stride 1, pad 2, 5x5).
    for case, stride, pad, dilation, groups in (("cdil", 1, 2, 2, 2), ("cdw", 2, 1, 1, 4), ("cdw2", 1, 2, 1, 4)):
        x, w, b = load(case + "_x"), load(case + "_w"), load(case + "_b")
        y = F.conv2d(x, w, b, stride=stride, padding=pad, dilation=dilation, groups=groups)
        y.backward(load(case + "_dy", False))
        for name, t in (("y", y), ("dx", x.grad), ("dw", w.grad)):
            save(case + "_" + name, t)


if __name__ == "__main__":
    main(sys.argv[1])

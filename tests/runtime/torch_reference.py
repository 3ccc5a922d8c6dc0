#!/usr/bin/env python3
"""PyTorch reference for tests/runtime/torch_crosscheck_test.cpp.

Usage: torch_reference.py DIR. Reads the inputs the test wrote to DIR as .npy
files, runs the same ops in PyTorch (float64), and writes the results next to
them as ref_<name>.npy. The layer parameters here must match the test's. Each
group of cases runs when its first input is there.
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F


def main(d):
    def load(name):
        return torch.from_numpy(np.load(os.path.join(d, name + ".npy")).astype(np.float64))

    def save(name, t):
        np.save(os.path.join(d, "ref_" + name + ".npy"), t.detach().numpy().astype(np.float32))

    if os.path.exists(os.path.join(d, "conv_a_x.npy")):
        ops(load, save, d)
    if os.path.exists(os.path.join(d, "tiedpool_a_x.npy")):
        tied_pools_and_sgd(load, save)


def ops(load, save, d):
    # conv_a: stride (2, 1), pad (1, 2), groups 2; conv_b: 3x3, stride 1, pad 1, groups 2.
    for case, stride, pad in (("conv_a", (2, 1), (1, 2)), ("conv_b", (1, 1), (1, 1))):
        x = load(case + "_x").requires_grad_()
        w = load(case + "_w").requires_grad_()
        b = load(case + "_b").requires_grad_()
        y = F.conv2d(x, w, b, stride=stride, padding=pad, groups=2)
        y.backward(load(case + "_dy"))
        save(case + "_y", y)
        save(case + "_dx", x.grad)
        save(case + "_dw", w.grad)
        save(case + "_db", b.grad)

    # batchnorm: training mode, eps 1e-5, momentum 0.1, running stats from 0 and 1.
    x = load("bn_x").requires_grad_()
    gamma = load("bn_gamma").requires_grad_()
    beta = load("bn_beta").requires_grad_()
    rmean = torch.zeros(x.shape[1], dtype=torch.float64)
    rvar = torch.ones(x.shape[1], dtype=torch.float64)
    y = F.batch_norm(x, rmean, rvar, gamma, beta, training=True, momentum=0.1, eps=1e-5)
    y.backward(load("bn_dy"))
    save("bn_y", y)
    save("bn_dx", x.grad)
    save("bn_dgamma", gamma.grad)
    save("bn_dbeta", beta.grad)
    save("bn_rmean", rmean)
    save("bn_rvar", rvar)

    # lrn: size 5, alpha 0.5, beta 0.75, k 2.
    x = load("lrn_x").requires_grad_()
    y = torch.nn.LocalResponseNorm(5, alpha=0.5, beta=0.75, k=2.0)(x)
    y.backward(load("lrn_dy"))
    save("lrn_y", y)
    save("lrn_dx", x.grad)

    # pools: kernel 3, stride 2, pad 1, ceil_mode; avg with count_include_pad=True.
    x = load("pool_x").requires_grad_()
    y = F.max_pool2d(x, 3, 2, 1, ceil_mode=True)
    y.backward(load("maxpool_dy"))
    save("maxpool_y", y)
    save("maxpool_dx", x.grad)
    x.grad = None
    y = F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=True)
    y.backward(load("avgpool_dy"))
    save("avgpool_y", y)
    save("avgpool_dx", x.grad)

    # softmax cross-entropy, mean over the batch.
    z = load("xent_logits").requires_grad_()
    labels = torch.from_numpy(np.load(os.path.join(d, "xent_labels.npy")).astype(np.int64))
    loss = F.cross_entropy(z, labels)
    loss.backward()
    save("xent_loss", loss.reshape(1))
    save("xent_dz", z.grad)
    # The same with label smoothing 0.1.
    z = load("xent_logits").requires_grad_()
    loss = F.cross_entropy(z, labels, label_smoothing=0.1)
    loss.backward()
    save("xent_smooth_loss", loss.reshape(1))
    save("xent_smooth_dz", z.grad)


def tied_pools_and_sgd(load, save):
    # max pools over inputs full of ties: a 2x2 stride 2, and 3x3 stride 2 pad 1 ceil_mode.
    for case, kernel, stride, pad, ceil in (("tiedpool_a", 2, 2, 0, False), ("tiedpool_b", 3, 2, 1, True)):
        x = load(case + "_x").requires_grad_()
        y = F.max_pool2d(x, kernel, stride, pad, ceil_mode=ceil)
        y.backward(load(case + "_dy"))
        save(case + "_y", y)
        save(case + "_dx", x.grad)

    # torch.optim.SGD(lr 0.1, momentum 0.9, weight_decay 0.05), one step per row of sgd_g.
    w = load("sgd_w").clone()
    grads = load("sgd_g")
    p = torch.nn.Parameter(w)
    opt = torch.optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.05)
    for g in grads:
        p.grad = g.clone()
        opt.step()
    save("sgd_w", p)
    save("sgd_momentum", opt.state[p]["momentum_buffer"])
    # The same with Nesterov momentum.
    p = torch.nn.Parameter(load("sgd_w").clone())
    opt = torch.optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.05, nesterov=True)
    for g in grads:
        p.grad = g.clone()
        opt.step()
    save("nesterov_w", p)
    save("nesterov_momentum", opt.state[p]["momentum_buffer"])
    # torch.optim.AdamW(lr 0.01, betas (0.8, 0.99), eps 1e-6, weight_decay 0.05).
    p = torch.nn.Parameter(load("sgd_w").clone())
    opt = torch.optim.AdamW([p], lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.05)
    for g in grads:
        p.grad = g.clone()
        opt.step()
    save("adamw_w", p)
    save("adamw_exp_avg", opt.state[p]["exp_avg"])
    save("adamw_exp_avg_sq", opt.state[p]["exp_avg_sq"])


if __name__ == "__main__":
    main(sys.argv[1])

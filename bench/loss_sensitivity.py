#!/usr/bin/python3
"""How much ResNet-50's loss after one update moves when the first gradient's rounding changes.

docs/gpu-validation.md ("ResNet-50's loss after the first update depends on the plan")
found that plans of examples/models/resnet50.yaml which differ only in their
convolution algorithms give the same first loss on an H200 but second losses up to
1.4e-3 apart (relative). This bench asks whether fp32 training of this network at this
learning rate amplifies rounding that much by itself, independently of mplan, with
PyTorch on the CPU:

  1. the same step computed by two convolution implementations of PyTorch's CPU backend
     (oneDNN, and the native im2col path with torch.backends.mkldnn off): their first
     gradients' relative difference and their second losses' relative difference;
  2. one first gradient perturbed element-wise by relative noise eps (a stand-in for
     another algorithm's rounding), the second loss's relative change per eps.

The network is torchvision's ResNet-50 (the example model's layers), the step the
example's: softmax cross-entropy, SGD lr 0.1, momentum 0.9, weight decay 1e-4, batch
128 of Gaussian images and uniform labels. A bench, not a test: it prints figures.

  /usr/bin/python3 bench/loss_sensitivity.py [--batch 128] [--threads 2] [--eps 1e-7,1e-6,1e-5]
"""
import argparse
import copy
import time

import torch
import torchvision

LR, MOMENTUM, WEIGHT_DECAY = 0.1, 0.9, 1e-4


def first_step(model, x, y, mkldnn):
    """Loss and gradients of the first step (train mode), with oneDNN on or off."""
    torch.backends.mkldnn.enabled = mkldnn
    model.zero_grad(set_to_none=False)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    return loss.item(), [p.grad.detach().clone() for p in model.parameters()]


def second_loss(model, grads, x, y):
    """The loss of the step after the update with `grads` (a copy of the model is updated:
    SGD's first step, momentum buffer = gradient + weight decay). oneDNN on."""
    torch.backends.mkldnn.enabled = True
    m = copy.deepcopy(model)
    with torch.no_grad():
        for p, g in zip(m.parameters(), grads):
            p.add_(g + WEIGHT_DECAY * p, alpha=-LR)
        return torch.nn.functional.cross_entropy(m(x), y).item()


def relative_difference(a, b):
    num = sum(float((u - v).double().pow(2).sum()) for u, v in zip(a, b))
    den = sum(float(u.double().pow(2).sum()) for u in a)
    return (num / den) ** 0.5


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--eps", default="1e-7,1e-6,1e-5")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = torchvision.models.resnet50(num_classes=1000)
    model.train()
    x = torch.randn(args.batch, 3, 224, 224)
    y = torch.randint(0, 1000, (args.batch,))
    # Batch norm's running statistics change in every forward pass in train mode; each
    # measurement starts from the same state.
    state = copy.deepcopy(model.state_dict())

    def restore():
        model.load_state_dict(state)

    t0 = time.time()
    restore()
    loss_a, grads_a = first_step(model, x, y, mkldnn=True)
    restore()
    loss_b, grads_b = first_step(model, x, y, mkldnn=False)
    restore()
    second_a = second_loss(model, grads_a, x, y)
    second_b = second_loss(model, grads_b, x, y)
    g_rel = relative_difference(grads_a, grads_b)
    print(f"torch {torch.__version__}, ResNet-50, batch {args.batch}, {args.threads} threads, seed {args.seed}")
    print(f"first loss: oneDNN {loss_a:.7f}, native {loss_b:.7f}, relative difference {abs(loss_a - loss_b) / loss_a:.2e}")
    print(f"first gradient: relative difference (2-norm over all parameters) {g_rel:.2e}")
    # Where the difference arises, from the loss down: the classifier, the last
    # block's convolutions (behind the last batch norms), the first layer.
    names = [n for n, _ in model.named_parameters()]
    for name in ["fc.weight", "layer4.2.conv3.weight", "layer4.2.conv1.weight", "layer4.0.conv1.weight",
                 "layer3.0.conv1.weight", "conv1.weight"]:
        i = names.index(name)
        print(f"  {name}: relative difference {relative_difference([grads_a[i]], [grads_b[i]]):.2e}")
    d2 = abs(second_a - second_b) / second_a
    print(f"second loss: from oneDNN's gradient {second_a:.7f}, from native's {second_b:.7f}, "
          f"relative difference {d2:.2e} ({d2 / g_rel:.2g}x the gradient's)")
    gen = torch.Generator().manual_seed(args.seed + 1)
    for eps in [float(e) for e in args.eps.split(",")]:
        noisy = [g * (1 + eps * torch.randn(g.shape, generator=gen)) for g in grads_a]
        restore()
        s = second_loss(model, noisy, x, y)
        rel = relative_difference(grads_a, noisy)
        d = abs(s - second_a) / second_a
        print(f"eps {eps:.0e}: gradient relative difference {rel:.2e}, second loss {s:.7f}, "
              f"relative change {d:.2e} ({d / rel:.2g}x the gradient's)")
    print(f"elapsed {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()

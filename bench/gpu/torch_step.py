#!/usr/bin/env python3
"""PyTorch eager's training step on the GPU: the reference of docs/gpu-validation.md, figure 4.

  torch_step.py --model vgg16|resnet50|vit_b_16 --batch B [--steps N] [--warmup W] [--math fp32|tf32|bf16|fp16]

The same networks as examples/models/{vgg16,resnet50,vit_b_16}.yaml (torchvision's,
1000 classes, 224x224 inputs), the same step (softmax cross-entropy, SGD with
momentum 0.9 and weight decay 5e-4), FP32 with TF32 off unless --math tf32 (bf16, fp16:
the forward pass and the loss under torch.autocast, fp16 with a GradScaler), and
cudnn.benchmark on (PyTorch's fastest convolution algorithms). Prints the mean
step time over N steps after W warm-up steps (CUDA events, synchronised), and
the peak memory PyTorch's allocator held (allocated and reserved).
"""
import argparse
import torch
import torchvision


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["vgg16", "resnet50", "vit_b_16"], required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--math", choices=["fp32", "tf32", "bf16", "fp16"], default="fp32")
    ap.add_argument("--kernels", type=int, default=0, metavar="N",
                    help="also profile one more step (torch.profiler) and print its GPU time by kernel family, "
                         "the N largest")
    args = ap.parse_args()
    tf32 = args.math == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    model = getattr(torchvision.models, args.model)(num_classes=1000).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    x = torch.randn(args.batch, 3, 224, 224, device=dev)
    y = torch.randint(0, 1000, (args.batch,), device=dev)

    low = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.math)
    scaler = torch.amp.GradScaler("cuda") if args.math == "fp16" else None

    def step():
        opt.zero_grad(set_to_none=False)
        with torch.autocast("cuda", dtype=low, enabled=low is not None):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        return loss

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(args.steps):
        loss = step()
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / args.steps
    gib = 1024.0 ** 3
    print(f"torch {torch.__version__} cudnn {torch.backends.cudnn.version()} {torch.cuda.get_device_name()}: "
          f"{args.model} batch {args.batch} math {args.math}: {ms:.2f} ms/step ({args.batch / ms * 1e3:.1f} samples/s), "
          f"loss {loss.item():.4f}, peak allocated {torch.cuda.max_memory_allocated() / gib:.2f} GiB, "
          f"peak reserved {torch.cuda.max_memory_reserved() / gib:.2f} GiB")
    if args.kernels > 0:
        print_kernel_families(step, args.kernels)


def kernel_family(name):
    """A kernel's family: what it computes, from cuDNN's, cuBLAS's and PyTorch's kernel names."""
    n = name.lower()
    for key, family in (("bn_fw", "batchnorm FP"), ("bn_bw", "batchnorm BP"), ("batch_norm_backward", "batchnorm BP"),
                        ("batch_norm", "batchnorm FP"), ("wgrad", "conv BP2 (filter)"), ("dgrad", "conv BP1 (data)"),
                        ("fprop", "conv FP"), ("winograd", "conv winograd"), ("fft", "conv fft"),
                        ("implicit", "conv implicit gemm"), ("gemm", "gemm"), ("threshold", "relu BP"),
                        ("clamp", "relu FP"), ("max_pool", "maxpool"), ("avg_pool", "avgpool"),
                        ("add", "add"), ("mul", "mul/sgd"), ("copy", "copy"), ("fill", "fill"),
                        ("reduce", "reduce"), ("softmax", "softmax")):
        if key in n:
            return family
    return "other: " + name[:60]


def print_kernel_families(step, top):
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    totals, counts = {}, {}
    for e in prof.events():
        if e.device_type.name != "CUDA":
            continue
        f = kernel_family(e.name)
        totals[f] = totals.get(f, 0.0) + e.device_time / 1e3
        counts[f] = counts.get(f, 0) + 1
    print(f"one step's GPU time by kernel family (torch.profiler): {sum(totals.values()):.2f} ms")
    for f, ms in sorted(totals.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {f}: {ms:.2f} ms in {counts[f]} kernels")


if __name__ == "__main__":
    main()

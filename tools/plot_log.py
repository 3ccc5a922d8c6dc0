#!/usr/bin/env python3
"""Draws the curves of a training run's metrics log (`train --log FILE`) to a PNG.

usage: plot_log.py LOG [LOG ...] -o curves.png [--smooth N]

LOG is the JSON-lines file the generated program appends one object per step
to (docs/generated-program.md, "The metrics log"). Two panels: the training
loss per step (and its mean over the last N steps, --smooth, default 20) with
the learning rate on a second axis, and the throughput in samples/s; where a
log has evaluations (`train --val`), their loss is marked on the first panel
and a third panel draws their top-1 and top-5 accuracy. Several logs are
drawn side by side in one figure, each with its file name.
Needs matplotlib (Debian: python3-matplotlib).
"""
import argparse
import json
import sys


def read_log(path):
    """The step lines and the evaluation lines of a log."""
    rows, evaluations = [], []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise SystemExit(f"plot_log: {path}:{number}: not a JSON object: {e}")
            if isinstance(row, dict) and "step" in row and "val_loss" in row:
                evaluations.append(row)
                continue
            if not isinstance(row, dict) or "step" not in row or "loss" not in row:
                raise SystemExit(f"plot_log: {path}:{number}: expected an object with step and loss, or val_loss")
            rows.append(row)
    if not rows and not evaluations:
        raise SystemExit(f"plot_log: {path}: no steps")
    return rows, evaluations


def number(v):
    return v if v is not None else float("nan")


def running_mean(values, n):
    out, window, total = [], [], 0.0
    for v in values:
        window.append(v)
        total += v
        if len(window) > n:
            total -= window.pop(0)
        out.append(total / len(window))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+")
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--smooth", type=int, default=20)
    args = parser.parse_args()
    if args.smooth < 1:
        raise SystemExit("plot_log: --smooth must be at least 1")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit("plot_log: needs matplotlib (Debian: apt-get install python3-matplotlib)")
    logs = [(path,) + read_log(path) for path in args.logs]
    evaluated = any(evaluations for _, _, evaluations in logs)
    if evaluated:
        fig, (loss_ax, speed_ax, val_ax) = plt.subplots(3, 1, figsize=(9, 9), sharex=True, height_ratios=[3, 1, 2])
    else:
        fig, (loss_ax, speed_ax) = plt.subplots(2, 1, figsize=(9, 7), sharex=True, height_ratios=[3, 1])
    lr_ax = loss_ax.twinx()
    for path, rows, evaluations in logs:
        steps = [r["step"] for r in rows]
        loss = [number(r["loss"]) for r in rows]
        line, = loss_ax.plot(steps, loss, alpha=0.3, linewidth=0.8)
        loss_ax.plot(steps, running_mean(loss, args.smooth), color=line.get_color(), label=f"{path} (loss)")
        lr = [r.get("lr") for r in rows]
        if any(v is not None for v in lr):
            lr_ax.plot(steps, [v if v is not None else float("nan") for v in lr], color=line.get_color(),
                       linestyle="--", linewidth=0.8, label=f"{path} (lr)")
        speed = [r.get("samples_per_s") for r in rows]
        speed_ax.plot(steps, [v if v is not None else float("nan") for v in speed], color=line.get_color())
        if evaluations:
            at = [r["step"] for r in evaluations]
            loss_ax.plot(at, [number(r["val_loss"]) for r in evaluations], "o", color=line.get_color(),
                         label=f"{path} (validation loss)")
            val_ax.plot(at, [100 * number(r.get("val_top1")) for r in evaluations], "o-", color=line.get_color(),
                        label=f"{path} (top-1)")
            val_ax.plot(at, [100 * number(r.get("val_top5")) for r in evaluations], "s--", color=line.get_color(),
                        alpha=0.6, label=f"{path} (top-5)")
    loss_ax.set_ylabel("training loss")
    lr_ax.set_ylabel("learning rate")
    speed_ax.set_ylabel("samples/s")
    speed_ax.set_xlabel("step")
    if evaluated:
        val_ax.set_ylabel("validation accuracy (%)")
        val_ax.set_xlabel("step")
        val_ax.legend(loc="lower right", fontsize="small")
        val_ax.grid(alpha=0.3)
    loss_ax.legend(loc="upper right", fontsize="small")
    loss_ax.grid(alpha=0.3)
    speed_ax.grid(alpha=0.3)
    fig.tight_layout()
    try:
        fig.savefig(args.output, dpi=100)
    except OSError as e:
        raise SystemExit(f"plot_log: {args.output}: cannot write: {e}")
    print(f"plot_log: wrote {args.output} ({sum(len(r) for _, r, _ in logs)} steps, "
          f"{sum(len(e) for _, _, e in logs)} evaluations)")


if __name__ == "__main__":
    sys.exit(main())

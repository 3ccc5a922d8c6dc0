#!/usr/bin/env python3
"""Compares two checkpoints of the generated program (docs/generated-program.md):

  compare_weights.py REFERENCE_DIR OTHER_DIR [--tolerance 1e-4]

For each float tensor, the relative difference max|a - b| / max|a|. Parameters
must be within the tolerance. A momentum buffer is compared the same way, but
one whose tensor's gradient is zero in exact arithmetic (the bias of a layer
whose output a batch norm re-centres, directly or through shift-equivariant
layers) holds only weight decay plus rounding noise, so it is judged against
the scale of the gradients of its layer's weight instead: such rows are
marked "(noise)". Exit 0 when everything is within the tolerance.
"""
import argparse
import glob
import os
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("reference")
    ap.add_argument("other")
    ap.add_argument("--tolerance", type=float, default=1e-4)
    args = ap.parse_args()
    worst_parameter = worst_state = 0.0
    failed = False
    for path in sorted(glob.glob(os.path.join(args.reference, "*.npy"))):
        name = os.path.basename(path)
        other = os.path.join(args.other, name)
        if not os.path.exists(other):
            print(f"{name}: missing in {args.other}")
            failed = True
            continue
        a = np.load(path)
        b = np.load(other)
        if a.dtype.kind != "f":
            continue
        a = a.astype(np.float64)
        b = b.astype(np.float64)
        scale = max(np.abs(a).max(), 1e-30)
        note = ""
        if name.endswith(".momentum.npy"):
            # The layer's weight momentum gives the scale of its gradients.
            weight = os.path.join(args.reference, name.split(".")[0] + ".weight.momentum.npy")
            if ".bias." in name and os.path.exists(weight):
                weight_scale = np.abs(np.load(weight)).max()
                if scale < 1e-2 * weight_scale:
                    scale = weight_scale
                    note = " (noise)"
        r = np.abs(a - b).max() / scale
        if name.endswith(".momentum.npy"):
            worst_state = max(worst_state, r)
        else:
            worst_parameter = max(worst_parameter, r)
        if r > args.tolerance or note:
            print(f"{name}: {r:.3e}{note}")
        failed |= r > args.tolerance
    print(f"max relative difference: parameters {worst_parameter:.3e}, momentum buffers {worst_state:.3e} "
          f"(tolerance {args.tolerance:g}): {'FAIL' if failed else 'PASS'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

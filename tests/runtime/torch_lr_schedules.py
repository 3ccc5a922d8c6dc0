"""PyTorch's learning rates for the schedules of runtime/lr_schedule.h.

usage: torch_lr_schedules.py LR UPDATES SPEC
Prints one learning rate per line: the lr optimizer.step() uses at each of
UPDATES updates, with scheduler.step() after each, for the flag's SPEC
(constant; step,every=N,gamma=G; multistep,milestones=A:B,gamma=G;
cosine,steps=N,warmup=W,start=F,min=L; onecycle,steps=N,pct=P,div=D,final_div=F).
"""
import sys
import warnings

import torch

warnings.filterwarnings("ignore")


def main():
    lr, updates, spec = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    parts = spec.split(",")
    kind, keys = parts[0], dict(p.split("=", 1) for p in parts[1:])
    weight = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([weight], lr=lr, momentum=0.9)
    sched = torch.optim.lr_scheduler
    if kind == "constant":
        s = sched.LambdaLR(opt, lambda u: 1.0)
    elif kind == "step":
        s = sched.StepLR(opt, step_size=int(keys["every"]), gamma=float(keys.get("gamma", 0.1)))
    elif kind == "multistep":
        milestones = [int(m) for m in keys["milestones"].split(":")]
        s = sched.MultiStepLR(opt, milestones=milestones, gamma=float(keys.get("gamma", 0.1)))
    elif kind == "cosine":
        steps, warmup = int(keys["steps"]), int(keys.get("warmup", 0))
        cosine = sched.CosineAnnealingLR(opt, T_max=steps - warmup, eta_min=float(keys.get("min", 0)))
        if warmup == 0:
            s = cosine
        else:
            linear = sched.LinearLR(opt, start_factor=float(keys.get("start", 1 / 3)), end_factor=1.0,
                                    total_iters=warmup)
            s = sched.SequentialLR(opt, [linear, cosine], milestones=[warmup])
    elif kind == "onecycle":
        s = sched.OneCycleLR(opt, max_lr=lr, total_steps=int(keys["steps"]), pct_start=float(keys.get("pct", 0.3)),
                             div_factor=float(keys.get("div", 25)), final_div_factor=float(keys.get("final_div", 1e4)),
                             anneal_strategy="cos", cycle_momentum=False)
    else:
        raise SystemExit("unknown schedule " + kind)
    for _ in range(updates):
        print(repr(opt.param_groups[0]["lr"]))
        opt.step()
        s.step()


if __name__ == "__main__":
    main()

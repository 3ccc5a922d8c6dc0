#pragma once
// Learning-rate schedules of the generated program (`train --lr-schedule`),
// each the closed form of its torch.optim.lr_scheduler class with
// scheduler.step() called after every optimizer.step(): update u (0-based,
// counted over the whole run, resumed runs included) uses lr_at(s, lr, u).
// docs/generated-program.md, "Learning-rate schedules".

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mplan::rt {

struct LrSchedule {
  enum class Kind {
    constant,   // lr
    step,       // StepLR(step_size=every, gamma)
    multistep,  // MultiStepLR(milestones, gamma)
    cosine,     // SequentialLR([LinearLR(start, 1, warmup), CosineAnnealingLR(steps - warmup, min)], [warmup])
    onecycle,   // OneCycleLR(max_lr=lr, total_steps=steps, pct_start=pct, div_factor=div,
                //            final_div_factor=final_div, anneal_strategy='cos', cycle_momentum=False)
  };
  Kind kind = Kind::constant;
  int64_t every = 0;                // step
  std::vector<int64_t> milestones;  // multistep, ascending
  double gamma = 0.1;               // step, multistep
  int64_t steps = 0;                // cosine, onecycle: the updates the schedule spans
  int64_t warmup = 0;               // cosine: linear warm-up updates (0: none)
  double start = 1.0 / 3;           // cosine: the warm-up's first factor (LinearLR's default)
  double min_lr = 0;                // cosine: CosineAnnealingLR's eta_min
  double pct = 0.3;                 // onecycle: the share of steps spent rising
  double div = 25;                  // onecycle: initial lr = lr / div
  double final_div = 1e4;           // onecycle: final lr = initial lr / final_div
};

// The learning rate of update u (0-based) for base (maximum, for onecycle) lr.
// Past a schedule's steps, cosine stays at min_lr; onecycle refuses them in
// PyTorch, and here stays at its final lr.
double lr_at(const LrSchedule& schedule, double lr, int64_t u);

// Parses `KIND[,key=value...]`: constant; step,every=N[,gamma=G];
// multistep,milestones=A:B:...[,gamma=G]; cosine,steps=N[,warmup=W][,start=F][,min=L];
// onecycle,steps=N[,pct=P][,div=D][,final_div=F]. Nothing, with *error
// naming the key and what was expected, on anything else.
std::optional<LrSchedule> parse_lr_schedule(const std::string& text, std::string* error);

// The schedule as the flag that gives it, keys in a fixed order (for the run's header line).
std::string lr_schedule_text(const LrSchedule& schedule);

}  // namespace mplan::rt

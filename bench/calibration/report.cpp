// The calibration bench's report (report.h).

#include "bench/calibration/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <iterator>
#include <tuple>
#include <utility>

#include "profiler/analytic_model.h"
#include "profiler/ideal.h"

namespace mplan::calibration {
namespace {

const char* const kArchitectures[] = {"kepler", "maxwell", "pascal", "volta", "ampere", "hopper", "turing", "ada"};

// Appends formatted text to `out`.
template <typename... Args>
void put(std::string& out, fmt::format_string<Args...> format, Args&&... args) {
  fmt::format_to(std::back_inserter(out), format, std::forward<Args>(args)...);
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  if (q == 0.5) return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));  // nearest rank
  return v[std::min(v.size(), std::max<size_t>(rank, 1)) - 1];
}

std::string stat_cells(const Stats& s) {
  return fmt::format("{} | {} | {} | {}", s.n, pct(s.median_error), pct(s.p90_error), num(s.bias));
}

std::string family_of(const Outcome& o) {
  ConvFamily family{};
  const ConvTask& task = o.c->convs.front().first;
  const std::string& algorithm = o.c->algorithm == "fastest" ? o.chosen : o.c->algorithm;
  return conv_family_of(task.direction, algorithm, family) ? conv_family_name(family) : algorithm;
}

std::string direction_of(const Outcome& o) { return conv_direction_name(o.c->convs.front().first.direction); }

// "relu FP", "linear BP2", "update": what another task is.
std::string task_of(const Outcome& o) {
  const TaskShape& shape = o.c->others.front().first.shape;
  return shape.kind == TaskKind::update ? "update" : fmt::format("{} {}", op_name(shape.op), task_kind_name(shape.kind));
}

// "volta" -> "Volta": an architecture's name in running text.
std::string arch_title(std::string name) {
  if (!name.empty()) name[0] = static_cast<char>(std::toupper(name[0]));
  return name;
}

// Rows "| key cells | n | median | p90 | bias |" of groups of outcomes; keys split at '|'.
void put_groups(std::string& out, const std::map<std::string, std::vector<const Outcome*>>& groups) {
  for (const auto& [key, list] : groups) put(out, "| {} | {} |\n", key, stat_cells(stats(list)));
}

}  // namespace

Result<CalibrationSet> load_calibration_set(const std::string& data_dir, const std::string& source_dir) {
  CalibrationSet set;
  set.cases = load_cases(data_dir, source_dir);
  set.published = set.cases.size();
  Result<std::vector<KernelTimesFile>> files = load_kernel_times_files(data_dir, source_dir);
  if (!files) return files.error();
  set.files = std::move(files).value();
  for (Case& c : load_kernel_time_cases(set.files, &set.summary, &set.split)) set.cases.push_back(std::move(c));
  set.devices = load_case_devices(set.cases);
  // Architectures with kernel times of their own are fitted on them alone (fit.h).
  for (const Case& c : set.cases)
    if (c.kernel_times) set.own.insert(set.devices.at(c.device).architecture);
  for (const Case& c : set.cases) {
    const std::string& arch = set.devices.at(c.device).architecture;
    (set.own.count(arch) ? set.own_cases[arch] : set.shared_cases).push_back(c);
  }
  return set;
}

std::vector<Outcome> evaluate(const std::vector<Case>& cases, const Devices& devices, const SourceTerms& terms) {
  std::vector<Outcome> outcomes;
  for (const Case& c : cases) {
    Outcome o{&c, 0, ""};
    o.predicted_ms = predict_ms(c, devices.at(c.device), terms, &o.chosen);
    outcomes.push_back(o);
  }
  return outcomes;
}

Stats stats(const std::vector<const Outcome*>& outcomes) {
  Stats s;
  std::vector<double> errors, ratios;
  for (const Outcome* o : outcomes) {
    errors.push_back(std::abs(o->ratio() - 1));
    ratios.push_back(o->ratio());
  }
  s.n = outcomes.size();
  if (s.n == 0) return s;
  s.median_error = quantile(errors, 0.5);
  s.p90_error = quantile(errors, 0.9);
  s.bias = quantile(ratios, 0.5);
  s.max_error = *std::max_element(errors.begin(), errors.end());
  return s;
}

std::string pct(double v) { return std::isnan(v) ? "-" : fmt::format("{:.1f}%", 100 * v); }
std::string num(double v) { return std::isnan(v) ? "-" : fmt::format("{:.2f}", v); }

void data_summary(std::string& out, const CalibrationSet& set) {
  auto held = [](const std::vector<Case>& list, size_t from, size_t to) {
    return std::count_if(list.begin() + static_cast<long>(from), list.begin() + static_cast<long>(to),
                         [](const Case& c) { return c.holdout; });
  };
  const std::vector<Case>& cases = set.cases;
  put(out, "{} cases ({} held out) on {} GPUs: {} published ({} held out, bench/data/calibration) and {} from kernel "
      "times ({} held out, kernel_times.csv)\n",
      cases.size(), held(cases, 0, cases.size()), set.devices.size(), set.published, held(cases, 0, set.published),
      cases.size() - set.published, held(cases, set.published, cases.size()));
  for (const KernelTimesFile& f : set.files)
    put(out, "- {}: {} on {}, {}, math {}\n", f.file, f.model->name, f.gpu, f.library, math_mode_name(f.math));
  int held_layers = 0;
  for (const auto& [layer, holdout] : set.split.layers()) held_layers += holdout;
  put(out, "Kernel-time layers: {} of {} held out (the second of every three distinct layers of each op)\n",
      held_layers, set.split.layers().size());
  put(out, "Left out of the kernel times:");
  for (const auto& [reason, n] : set.summary.skipped) put(out, " {} x {};", n, reason);
  put(out, "\n");
}

std::map<std::string, std::string> held_out_text(const std::vector<Outcome>& outcomes, const Devices& devices,
                                                 const std::set<std::string>& own,
                                                 const std::set<std::string>& scaled) {
  std::map<std::string, std::map<CaseKind, std::vector<const Outcome*>>> by_arch;
  std::map<std::string, std::set<std::string>> gpus, maths;
  for (const Outcome& o : outcomes) {
    if (!o.c->holdout) continue;
    const std::string arch = devices.at(o.c->device).architecture;
    by_arch[arch][o.c->kind].push_back(&o);
    gpus[arch].insert(o.c->device);
    if (o.c->kernel_times) maths[arch].insert(math_mode_name(o.c->math));
  }
  std::map<std::string, std::string> text;
  for (const char* arch : kArchitectures) {
    std::string t;
    for (CaseKind kind : {CaseKind::conv_task, CaseKind::other_task, CaseKind::network}) {
      const std::vector<const Outcome*>& list = by_arch[arch][kind];
      if (list.empty()) continue;
      const Stats s = stats(list);
      t += fmt::format("{}{} median {} {} {} (n={})", t.empty() ? "" : "; ", case_kind_name(kind),
                       pct(s.median_error), kind == CaseKind::network ? "max" : "p90",
                       kind == CaseKind::network ? pct(s.max_error) : pct(s.p90_error) + " bias " + num(s.bias), s.n);
    }
    if (t.empty()) {
      text[arch] = "no held-out measurement: error unknown";
    } else {
      std::string list;
      for (const std::string& g : gpus[arch]) list += (list.empty() ? "" : ", ") + g;
      text[arch] = t + " on " + list;
      // A table fitted on kernel times of its own says which math modes they cover
      // (the plan may run in another: the tensor-core values are not measured).
      if (own.count(arch)) {
        std::string modes;
        for (const std::string& m : maths[arch]) modes += (modes.empty() ? "" : ", ") + m;
        text[arch] += ", kernel times in math " + modes + " only";
      }
    }
  }
  // A borrowed table without held-out data says whose values it holds: with
  // speed factors of its own, no other table's error is its error; without,
  // its relative's is.
  for (const char* arch : kArchitectures) {
    if (params_arch(arch) == arch || own.count(arch) || !gpus[arch].empty()) continue;
    const bool parent_measured = !gpus[params_arch(arch)].empty();
    const std::string parent = arch_title(params_arch(arch));
    if (scaled.count(arch))
      text[arch] += " (" + parent + "'s table times speed factors fitted on networks of its own)";
    else
      text[arch] += "; its table is " + parent + "'s" +
                    (parent_measured ? ", whose held-out error is: " + text[params_arch(arch)] : ", which has none either");
  }
  return text;
}

std::map<std::string, std::string> fitted_on_text(const std::vector<Case>& cases, const Devices& devices,
                                                  const std::set<std::string>& own) {
  std::map<std::string, std::map<std::string, int>> counts;  // arch -> "device kind" -> n
  for (const Case& c : cases)
    if (!c.holdout) ++counts[devices.at(c.device).architecture][c.device + " " + case_kind_name(c.kind)];
  auto list = [&](const std::string& arch) {
    std::string t;
    for (const auto& [what, n] : counts[arch]) t += fmt::format("{}{} {}", t.empty() ? "" : ", ", n, what);
    return t;
  };
  std::map<std::string, std::string> text;
  for (const char* arch : kArchitectures) {
    std::string t = list(arch);
    if (own.count(arch)) {
      t += " (kernel profiler, FP32)";
    } else if (params_arch(arch) != arch) {
      // A table borrowed from a relative: the relative's data, and any speed factors' own.
      t = (t.empty() ? "none" : t + " (speed factors)") + "; " + arch_title(params_arch(arch)) +
          "'s table: " + list(params_arch(arch));
    }
    text[arch] = t.empty() ? "none" : t;
  }
  return text;
}

void case_list(std::string& out, const std::vector<Outcome>& outcomes) {
  put(out, "\n## Every case\n\n| split | GPU | library | case | predicted ms | measured ms | ratio | predicted algorithm |\n"
      "|---|---|---|---|---|---|---|---|\n");
  for (const Outcome& o : outcomes)
    put(out, "| {} | {} | {} | {} | {:.4g} | {:.4g} | {:.2f} | {} |\n", o.c->holdout ? "holdout" : "fit", o.c->device,
        o.c->library, o.c->label, o.predicted_ms, o.c->measured_ms, o.ratio(),
        o.c->kind == CaseKind::conv_task ? o.chosen : "");
}

void split_report(std::string& out, const std::vector<Outcome>& outcomes, bool holdout,
                  const std::string& line_prefix) {
  const char* part = holdout ? "held-out" : "fit";
  std::vector<const Outcome*> conv, other, net;
  for (const Outcome& o : outcomes)
    if (o.c->holdout == holdout)
      (o.c->kind == CaseKind::conv_task ? conv : o.c->kind == CaseKind::other_task ? other : net).push_back(&o);

  // Convolution tasks by GPU, direction and family.
  put(out, "\n## Convolution tasks, {} split, by GPU, direction and algorithm family\n\n", part);
  put(out, "Family: of the measured algorithm, or of the model's fastest where the source timed the\n"
      "library's fastest (`fastest` rows). Error: |predicted/measured - 1|; bias: median predicted/measured.\n\n");
  put(out, "| GPU | direction | family | cases | median error | p90 error | bias |\n|---|---|---|---|---|---|---|\n");
  std::map<std::string, std::vector<const Outcome*>> by_key, by_direction, by_gpu;
  for (const Outcome* o : conv) {
    by_key[o->c->device + " | " + direction_of(*o) + " | " + family_of(*o)].push_back(o);
    by_direction[o->c->device + " | " + direction_of(*o)].push_back(o);
    by_gpu[o->c->device].push_back(o);
  }
  put_groups(out, by_key);
  put(out, "\n| GPU | direction | cases | median error | p90 error | bias |\n|---|---|---|---|---|---|\n");
  put_groups(out, by_direction);
  put(out, "\n| GPU | conv cases | median error | p90 error | bias |\n|---|---|---|---|---|\n");
  put_groups(out, by_gpu);
  // Published single layers and the kernel profiler's per-algorithm times apart:
  // hundreds of kernel-time cases would swamp the published ones.
  std::vector<const Outcome*> published_conv, kernel_conv;
  for (const Outcome* o : conv) (o->c->kernel_times ? kernel_conv : published_conv).push_back(o);
  const Stats all = stats(published_conv), kernel = stats(kernel_conv);
  put(out, "| **all published** | {} | **{}** | **{}** | {} |\n", all.n, pct(all.median_error), pct(all.p90_error),
      num(all.bias));
  put(out, "| **all kernel times** | {} | **{}** | **{}** | {} |\n", kernel.n, pct(kernel.median_error),
      pct(kernel.p90_error), num(kernel.bias));

  // Other tasks (the kernel profiler's): by GPU and op.
  if (!other.empty()) {
    put(out, "\n## Other tasks, {} split, by GPU and task\n\n| GPU | task | cases | median error | p90 error | bias |\n"
        "|---|---|---|---|---|---|\n", part);
    std::map<std::string, std::vector<const Outcome*>> by_task, other_by_gpu;
    for (const Outcome* o : other) {
      by_task[o->c->device + " | " + task_of(*o)].push_back(o);
      other_by_gpu[o->c->device + " | **all**"].push_back(o);
    }
    put_groups(out, by_task);
    put_groups(out, other_by_gpu);
  }

  // Networks.
  put(out, "\n## Whole networks, {} split\n\n| GPU | library | network and pass | predicted ms | measured ms | ratio |\n"
      "|---|---|---|---|---|---|\n", part);
  std::map<std::string, std::vector<const Outcome*>> net_by_gpu;
  for (const Outcome* o : net) {
    put(out, "| {} | {} | {} | {:.1f} | {:.1f} | {:.2f} |\n", o->c->device, o->c->library, o->c->label,
        o->predicted_ms, o->c->measured_ms, o->ratio());
    net_by_gpu[o->c->device].push_back(o);
  }
  put(out, "\n| GPU | network cases | median error | max error | bias |\n|---|---|---|---|---|\n");
  for (const auto& [gpu, list] : net_by_gpu) {
    const Stats s = stats(list);
    put(out, "| {} | {} | {} | {} | {} |\n", gpu, s.n, pct(s.median_error), pct(s.max_error), num(s.bias));
  }
  const Stats nets = stats(net);
  put(out, "| **all** | {} | **{}** | **{}** | {} |\n", nets.n, pct(nets.median_error), pct(nets.max_error),
      num(nets.bias));

  // The calibration's targets, on this split: published convolutions median
  // <= 20%, p90 <= 50%, every GPU's bias within 0.85-1.15, every network
  // within 20%; the kernel times' convolutions median, p90 and bias likewise.
  bool bias_ok = true;
  for (const auto& [gpu, list] : by_gpu) {
    const Stats s = stats(list);
    if (!list.front()->c->kernel_times) bias_ok = bias_ok && s.bias >= 0.85 && s.bias <= 1.15;
  }
  put(out, "\n{}targets ({}, published): conv median {} (<= 20%: {}), conv p90 {} (<= 50%: {}), every GPU's conv "
      "bias in 0.85-1.15: {}, every network within 20%: {}\n",
      line_prefix, part, pct(all.median_error), all.median_error <= 0.2 ? "yes" : "NO", pct(all.p90_error),
      all.p90_error <= 0.5 ? "yes" : "NO", bias_ok ? "yes" : "NO", nets.max_error <= 0.2 ? "yes" : "NO");
  if (kernel.n > 0)
    put(out, "{}targets ({}, kernel times): conv median {} (<= 20%: {}), conv p90 {} (<= 50%: {}), bias {} (in "
        "0.85-1.15: {})\n",
        line_prefix, part, pct(kernel.median_error), kernel.median_error <= 0.2 ? "yes" : "NO", pct(kernel.p90_error),
        kernel.p90_error <= 0.5 ? "yes" : "NO", num(kernel.bias),
        kernel.bias >= 0.85 && kernel.bias <= 1.15 ? "yes" : "NO");
}

// Fastest forward algorithm, predicted against measured, over every forward
// task with per-algorithm measurements (cases that name their algorithm,
// grouped by GPU, library and task). The measured fastest is among every
// option the source timed (kernel times: also those the model refuses, which
// the model then cannot pick); the model ranks the options it can price.
// "Every algorithm": the model's fastest over every algorithm it offers for
// the shape (what the planner picks from), measured by cuDNN or not.
void algorithm_agreement(std::string& out, const std::vector<Outcome>& outcomes, const Devices& devices,
                         bool list_tasks) {
  std::map<std::string, std::vector<const Outcome*>> groups;
  for (const Outcome& o : outcomes)
    if (o.c->kind == CaseKind::conv_task && o.c->algorithm != "fastest" &&
        o.c->convs.front().first.direction == ConvDirection::forward)
      groups[o.c->device + "|" + o.c->library + "|" + o.c->task].push_back(&o);
  struct Tally {
    int tasks = 0, fastest = 0, top_two = 0, every = 0;
  };
  std::map<std::string, Tally> tally;                   // "GPU | split"
  std::map<std::string, int> confusion;                  // held-out "measured -> predicted"
  if (list_tasks)
    put(out, "\n## Fastest forward algorithm per task\n\n| GPU | split | task | measured fastest | predicted fastest "
        "(among the measured) | over every algorithm |\n|---|---|---|---|---|---|\n");
  for (const auto& [key, list] : groups) {
    if (list.size() < 2) continue;  // one option the model can price: nothing to rank
    const Case& first = *list.front()->c;
    const ConvTask& task = first.convs.front().first;
    // Ties broken as analytic_options breaks them (less workspace, then
    // cuDNN's order), not by the data file's order: grouped layers price
    // their GEMM algorithms alike, and the file lists the measured fastest first.
    auto rank_key = [&](const std::string& algorithm, double ms) {
      return std::make_tuple(ms, conv_workspace_bytes(task.direction, algorithm, task.shape, task.batch),
                             cudnn_algorithm_id(task.direction, algorithm));
    };
    std::vector<const Outcome*> ranked = list;
    std::stable_sort(ranked.begin(), ranked.end(), [&](const Outcome* a, const Outcome* b) {
      return rank_key(a->c->algorithm, a->predicted_ms) < rank_key(b->c->algorithm, b->predicted_ms);
    });
    std::string measured = first.measured_fastest;
    if (measured.empty())
      measured = (*std::min_element(list.begin(), list.end(), [](auto* a, auto* b) {
                   return a->c->measured_ms < b->c->measured_ms;
                 }))->c->algorithm;
    const ConvTask every = conv_task(task.shape, task.direction, task.batch, first.library);
    std::string best_every;
    double best_ms = 0;
    for (const ConvOption& o : every.options) {
      if (!devices.at(first.device).arch.runs(task.direction, o.algorithm)) continue;  // as analytic_options
      const double ms = stream_time_ms(phases_cost(devices.at(first.device), o.phases, first.math), first.stream);
      if (best_every.empty() || rank_key(o.algorithm, ms) < rank_key(best_every, best_ms))
        best_every = o.algorithm, best_ms = ms;
    }
    Tally& t = tally[first.device + " | " + (first.holdout ? "held-out" : "fit")];
    ++t.tasks;
    t.fastest += ranked[0]->c->algorithm == measured;
    t.top_two += ranked[0]->c->algorithm == measured || (ranked.size() > 1 && ranked[1]->c->algorithm == measured);
    t.every += best_every == measured;
    if (first.holdout && ranked.size() > 1) ++confusion[measured + " -> " + ranked[0]->c->algorithm];
    if (list_tasks)
      put(out, "| {} | {} | {} | {} | {} | {} |\n", first.device, first.holdout ? "holdout" : "fit", first.task,
          measured, ranked[0]->c->algorithm, best_every);
  }
  put(out, "\n## Fastest forward algorithm, predicted against measured\n\n"
      "| GPU | split | forward tasks | model's fastest is the measured fastest | measured fastest in the "
      "model's top two | model's fastest over every algorithm it offers |\n|---|---|---|---|---|---|\n");
  auto share = [](int k, int n) { return fmt::format("{} ({})", k, n ? pct(static_cast<double>(k) / n) : "-"); };
  for (const auto& [key, t] : tally)
    put(out, "| {} | {} | {} | {} | {} |\n", key, t.tasks, share(t.fastest, t.tasks), share(t.top_two, t.tasks),
        share(t.every, t.tasks));
  put(out, "\nHeld-out tasks, measured fastest -> model's fastest (among the measured):");
  for (const auto& [pair, n] : confusion) put(out, " {} {};", pair, n);
  put(out, "\n");
}

// The time the planner uses for a convolution task: the model's fastest
// option against the measured fastest, over every kernel-time task
// (grouped by GPU, library, math mode and task; the options the model
// prices, with no workspace limit). The per-algorithm error above also
// scores options no planner would pick (cuDNN 9's pathological kernels);
// this is the error of the one it picks when the workspace allows.
void fastest_option_error(std::string& out, const std::vector<Outcome>& outcomes) {
  std::map<std::string, std::vector<const Outcome*>> groups;
  for (const Outcome& o : outcomes)
    if (o.c->kind == CaseKind::conv_task && o.c->kernel_times)
      groups[fmt::format("{}|{}|{}|{}", o.c->device, o.c->library, math_mode_name(o.c->math), o.c->task)].push_back(
          &o);
  // One outcome per task: the model's fastest time over the measured fastest.
  std::vector<Outcome> fastest;
  std::vector<Case> tasks;
  tasks.reserve(groups.size());
  for (const auto& [key, list] : groups) {
    const auto by_measured = [](const Outcome* a, const Outcome* b) { return a->c->measured_ms < b->c->measured_ms; };
    const auto by_predicted = [](const Outcome* a, const Outcome* b) { return a->predicted_ms < b->predicted_ms; };
    Case task = *(*std::min_element(list.begin(), list.end(), by_measured))->c;
    tasks.push_back(task);
    fastest.push_back({nullptr, (*std::min_element(list.begin(), list.end(), by_predicted))->predicted_ms, ""});
  }
  for (size_t i = 0; i < tasks.size(); ++i) fastest[i].c = &tasks[i];
  put(out, "\n## Fastest option per convolution task (kernel times), predicted against measured\n\n"
      "The model's fastest option against the measured fastest, per task, among the options the model "
      "prices and with no workspace limit (the time the planner uses where the workspace allows).\n\n"
      "| GPU | split | direction | tasks | median error | p90 error | bias |\n|---|---|---|---|---|---|---|\n");
  std::map<std::string, std::vector<const Outcome*>> rows;
  for (const Outcome& o : fastest) {
    const std::string split = o.c->holdout ? "held-out" : "fit";
    rows[fmt::format("{} | {} | {}", o.c->device, split, direction_of(o))].push_back(&o);
    rows[fmt::format("{} | {} | all", o.c->device, split)].push_back(&o);
    rows[fmt::format("**all** | {} | all", split)].push_back(&o);
  }
  put_groups(out, rows);
}

// The ideal iteration (moDNN's ideal case) of every profiled model at its
// batch: predicted by the analytic model in the file's math mode against the
// sum of the fastest measured options; and the same over the held-out layers'
// tasks only.
void network_ideals(std::string& out, const std::vector<KernelTimesFile>& files, const LayerSplit& split,
                    const Devices& devices) {
  put(out, "\n## Ideal iteration of the profiled models (kernel times), predicted against measured\n\n"
      "Every task at the model's batch with its fastest option, summed (`mplan compile` prints it as\n"
      "`ideal`). Whole networks mix fit and held-out layers; the middle columns sum the convolution tasks\n"
      "alone against the fastest legacy algorithm measured (the model prices no graph-API configuration;\n"
      "the measured ideal and the held-out sums take the fastest option, `graph_<r>` included), the\n"
      "last ones the held-out layers' tasks. The predictions are the planner's (a busy stream), the\n"
      "measurements sums of tasks each timed alone; Hopper's table splits no fixed cost between host and\n"
      "device, so on it the two forms agree.\n\n"
      "| GPU | model | batch | predicted ms | measured ms | ratio | convolutions: predicted ms | measured (legacy) ms | "
      "ratio | held-out tasks: predicted ms | measured ms | ratio |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const KernelTimesFile& f : files) {
    const int64_t batch = f.model->batch;
    const Result<double> measured = measured_ideal_ms(f, batch);
    if (!measured) {
      put(out, "| {} | {} | {} | - | - | - | - | - | - | - | - | - |  ({})\n", f.device, f.model->name, batch,
          measured.error().message);
      continue;
    }
    const AnalyticCostModel model(devices.at(f.device), f.math);
    const IdealRun ideal = ideal_run(f.tdfg, model, batch);
    // Held-out tasks: the analytic fastest against the measured fastest.
    // ... and the fastest legacy algorithm, what the model prices (a graph-API
    // configuration `graph_<r>` is no algorithm of the model's).
    std::map<std::string, double> fastest_measured, fastest_legacy;
    for (const rt::JobResult& job : f.results.results)
      for (const rt::JobOption& o : job.options) {
        auto [it, fresh] = fastest_measured.emplace(job.key, o.time_ms);
        if (!fresh) it->second = std::min(it->second, o.time_ms);
        if (o.algorithm.rfind("graph_", 0) == 0) continue;
        auto [legacy, first] = fastest_legacy.emplace(job.key, o.time_ms);
        if (!first) legacy->second = std::min(legacy->second, o.time_ms);
      }
    double held_predicted = 0, held_measured = 0, conv_predicted = 0, conv_measured = 0;
    for (TaskId t = 0; t < static_cast<TaskId>(f.tdfg.tasks.size()); ++t) {
      const TaskShape shape = describe_task(f.tdfg, t);
      const int64_t b = shape.kind == TaskKind::update ? 0 : batch;
      const std::string key = fmt::format("{}@{}", task_signature(shape), b);
      const double task_measured = fastest_measured.at(key);
      if (shape.op == Op::conv && shape.kind != TaskKind::update) {
        conv_predicted += ideal.choices[t].time_ms;
        auto legacy = fastest_legacy.find(key);
        conv_measured += legacy != fastest_legacy.end() ? legacy->second : task_measured;
      }
      if (!f.holdout_whole && !split.holdout(layer_signature(shape))) continue;
      held_predicted += ideal.choices[t].time_ms;
      held_measured += task_measured;
    }
    auto ratio = [](double predicted, double measured) { return measured > 0 ? predicted / measured : NAN; };
    put(out, "| {} | {} | {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} |\n",
        f.device, f.model->name, batch, ideal.time_ms, *measured, ideal.time_ms / *measured, conv_predicted,
        conv_measured, ratio(conv_predicted, conv_measured), held_predicted, held_measured,
        ratio(held_predicted, held_measured));
  }
}

std::string markdown_report(const CalibrationSet& set, const SourceTerms& terms, const std::vector<Outcome>& outcomes,
                            const std::string& date, const std::string& command) {
  std::string out;
  put(out, "# Calibration: held-out error of the analytic cost model\n\n"
      "Generated by `bench/calibration_bench.cpp` with `{}`; do not edit by hand.\n\n"
      "Date: {}\n\n", command, date);
  put(out, "The analytic cost model (`docs/cost-model.md`) with the committed architecture tables\n"
      "(`examples/devices/architectures/*.yaml`) predicts every case of the calibration set: published\n"
      "measurements (`bench/data/calibration/`, whose README names every source) and the kernel profiler's\n"
      "per-task times on GPUs the project ran on (`bench/data/calibration/kernel_times.csv`). The figures\n"
      "below are those of the **held-out split**, which no table is fitted on (`docs/cost-model.md`,\n"
      "\"Calibration\", says what is fitted on which cases and how the split is fixed). Nothing is timed\n"
      "when the report is made: its figures follow from the committed data, tables and code, so rerunning\n"
      "the command reproduces this file but for its date line. `build/bench/calibration_bench` without\n"
      "options prints the same tables, and the fit split's as well.\n\n"
      "Error: |predicted/measured - 1|, as the median, the 90th percentile (nearest rank) or the maximum\n"
      "over a group; bias: the median of predicted/measured (above 1: the model predicts too slow).\n");

  // The set.
  const auto held = [](auto from, auto to) { return std::count_if(from, to, [](const Case& c) { return c.holdout; }); };
  const auto published_end = set.cases.begin() + static_cast<long>(set.published);
  put(out, "\n## The calibration set\n\n"
      "{} cases ({} held out) on {} GPUs: {} published ({} held out) and {} from kernel times ({} held out),\n"
      "from these result files of the kernel profiler:\n\n"
      "| result file | model | GPU | library | math | split |\n|---|---|---|---|---|---|\n",
      set.cases.size(), held(set.cases.begin(), set.cases.end()), set.devices.size(), set.published,
      held(set.cases.begin(), published_end), set.cases.size() - set.published, held(published_end, set.cases.end()));
  for (const KernelTimesFile& f : set.files)
    put(out, "| {} | {} | {} | {} | {} | {} |\n", f.file, f.model->name, f.gpu, f.library, math_mode_name(f.math),
        f.holdout_whole ? "held out whole" : "by layer");
  int held_layers = 0;
  for (const auto& [layer, holdout] : set.split.layers()) held_layers += holdout;
  put(out, "\nKernel-time layers: {} of {} held out (the second of every three distinct layers of each op; the\n"
      "last section lists them). Left out of the kernel times, and counted:\n\n", held_layers,
      set.split.layers().size());
  for (const auto& [reason, n] : set.summary.skipped) put(out, "- {} x {}\n", n, reason);

  // What the sources add that the product's model has no term for.
  put(out, "\n## Source terms\n\n"
      "Fitted on the fit split in every run and written to no table (`bench/calibration/cases.h`,\n"
      "`SourceTerms`): the speed factor of an old cuDNN release's kernels on an architecture (a time\n"
      "multiplier of their device work), and a framework's own host work per task beyond the launches and\n"
      "calls the model prices.\n\n| term | value |\n|---|---|\n");
  for (const auto& [key, value] : terms)
    if (key.rfind("host.", 0) != 0) put(out, "| speed factor {} | {:.2f} |\n", key, value);
  for (const auto& [key, value] : terms)
    if (key.rfind("host.", 0) == 0) put(out, "| host work per task, {} | {:.1f} µs |\n", key.substr(5), value);

  // Per architecture, and per device.
  put(out, "\n## Held-out error per architecture\n\n"
      "In the words of a table's `held_out_error`, the line `mplan compile` prints for a device of the\n"
      "architecture. (`--fit --write` writes that line with the refit's own source terms, which can move\n"
      "a figure by a tenth of a point.)\n\n");
  for (const auto& [arch, text] : held_out_text(outcomes, set.devices, set.own)) put(out, "- {}: {}\n", arch, text);
  std::map<std::string, std::pair<int, int>> per_device;  // fit, held-out cases
  for (const Case& c : set.cases) ++(c.holdout ? per_device[c.device].second : per_device[c.device].first);
  put(out, "\n## Devices\n\nEvery device file (`examples/devices/`), the architecture table it names, and the cases\n"
      "measured on it.\n\n| device | GPU | architecture | fit cases | held-out cases |\n|---|---|---|---|---|\n");
  for (const std::string& name : available_devices()) {
    const Result<Device> device = load_device(name);
    if (!device) {
      put(out, "| {} | - | - | - | - |  ({})\n", name, device.error().message);
      continue;
    }
    const std::pair<int, int> n = per_device.count(name) ? per_device.at(name) : std::pair<int, int>{0, 0};
    put(out, "| {} | {} | {} | {} | {} |\n", name, device->description, device->architecture, n.first, n.second);
  }

  split_report(out, outcomes, true, "- ");
  algorithm_agreement(out, outcomes, set.devices, false);
  fastest_option_error(out, outcomes);
  network_ideals(out, set.files, set.split, set.devices);
  put(out, "\n## Kernel-time layers held out\n\n");
  for (const auto& [layer, holdout] : set.split.layers())
    if (holdout) put(out, "- `{}`\n", layer);
  return out;
}

}  // namespace mplan::calibration

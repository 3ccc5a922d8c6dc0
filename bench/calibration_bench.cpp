// Calibration of the analytic cost model against published measurements
// (bench/data/calibration: every row with its source; README.md there lists
// them), split once and for all into a fit part and a held-out part (the
// `split` column). Reports the error of the committed architecture tables
// (examples/devices/architectures/*.yaml) on both parts: single convolution
// tasks per GPU, direction and algorithm family (median and p90 of
// |predicted/measured - 1|, bias = median predicted/measured), whole
// networks per GPU, and whether the fastest forward algorithm agrees with
// the measured fastest. docs/cost-model.md records a run.
//
//   build/bench/calibration_bench               # evaluate the committed tables
//   build/bench/calibration_bench --fit         # refit on the fit split, evaluate the fit
//   build/bench/calibration_bench --fit --write # ... and rewrite the tables
//   build/bench/calibration_bench --cases       # also print every case
//
// The fit is bench/calibration/fit.h: least squares in log space over a few
// parameters per architecture. Old cuDNN releases (R1-R3) get a speed factor
// of their own, refitted on the fit split in every run (it is no part of the
// product's tables). Baidu DeepBench and Justin Johnson's cnn-benchmarks are
// deliberately not in the set: they are the independent check.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bench/calibration/cases.h"
#include "bench/calibration/fit.h"

namespace {

using namespace mplan;
using namespace mplan::calibration;

const std::string kSourceDir = MPLAN_SOURCE_DIR;
const std::string kDataDir = kSourceDir + "/bench/data/calibration";

struct Outcome {
  const Case* c;
  double predicted_ms;
  std::string chosen;  // the predicted fastest algorithm (single convolutions)
  double ratio() const { return predicted_ms / c->measured_ms; }
};

struct Stats {
  size_t n = 0;
  double median_error = NAN, p90_error = NAN, bias = NAN, max_error = NAN;
};

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  if (q == 0.5) return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));  // nearest rank
  return v[std::min(v.size(), std::max<size_t>(rank, 1)) - 1];
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

std::string family_of(const Outcome& o) {
  ConvFamily family{};
  const ConvTask& task = o.c->convs.front().first;
  const std::string& algorithm = o.c->algorithm == "fastest" ? o.chosen : o.c->algorithm;
  return conv_family_of(task.direction, algorithm, family) ? conv_family_name(family) : algorithm;
}

std::vector<Outcome> evaluate(const std::vector<Case>& cases, const Devices& devices, const ReleaseFactors& release) {
  std::vector<Outcome> outcomes;
  for (const Case& c : cases) {
    Outcome o{&c, 0, ""};
    o.predicted_ms = predict_ms(c, devices.at(c.device), release, &o.chosen);
    outcomes.push_back(o);
  }
  return outcomes;
}

// Per-architecture summary of the held-out error, for the tables' held_out_error.
std::map<std::string, std::string> held_out_text(const std::vector<Outcome>& outcomes, const Devices& devices) {
  std::map<std::string, std::vector<const Outcome*>> conv, net;
  std::map<std::string, std::set<std::string>> gpus;
  for (const Outcome& o : outcomes) {
    if (!o.c->holdout) continue;
    const std::string arch = devices.at(o.c->device).architecture;
    (o.c->network ? net : conv)[arch].push_back(&o);
    gpus[arch].insert(o.c->device);
  }
  std::map<std::string, std::string> text;
  for (const char* arch : {"kepler", "maxwell", "pascal", "volta", "ampere", "hopper"}) {
    std::string t;
    if (!conv[arch].empty()) {
      const Stats s = stats(conv[arch]);
      t += fmt::format("conv tasks median {} p90 {} bias {} (n={})", pct(s.median_error), pct(s.p90_error),
                       num(s.bias), s.n);
    }
    if (!net[arch].empty()) {
      const Stats s = stats(net[arch]);
      t += fmt::format("{}networks median {} max {} (n={})", t.empty() ? "" : "; ", pct(s.median_error),
                       pct(s.max_error), s.n);
    }
    if (t.empty()) {
      text[arch] = "no held-out measurement: error unknown";
    } else {
      std::string list;
      for (const std::string& g : gpus[arch]) list += (list.empty() ? "" : ", ") + g;
      text[arch] = t + " on " + list;
    }
  }
  return text;
}

std::map<std::string, std::string> fitted_on_text(const std::vector<Case>& cases, const Devices& devices) {
  std::map<std::string, std::map<std::string, int>> counts;  // arch -> "device kind" -> n
  for (const Case& c : cases)
    if (!c.holdout)
      ++counts[params_arch(devices.at(c.device).architecture)][c.device + (c.network ? " networks" : " conv tasks")];
  std::map<std::string, std::string> text;
  for (const char* arch : {"kepler", "maxwell", "pascal", "volta", "ampere", "hopper"}) {
    std::string t;
    for (const auto& [what, n] : counts[params_arch(arch)]) t += fmt::format("{}{} {}", t.empty() ? "" : ", ", n, what);
    if (std::string(arch) == "hopper") t = "none (Ampere's table); Ampere: " + t;
    text[arch] = t.empty() ? "none" : t;
  }
  return text;
}

void print_cases(const std::vector<Outcome>& outcomes) {
  fmt::print("\n## Every case\n\n| split | GPU | library | case | predicted ms | measured ms | ratio | predicted algorithm |\n"
             "|---|---|---|---|---|---|---|---|\n");
  for (const Outcome& o : outcomes)
    fmt::print("| {} | {} | {} | {} | {:.4g} | {:.4g} | {:.2f} | {} |\n", o.c->holdout ? "holdout" : "fit",
               o.c->device, o.c->library, o.c->label, o.predicted_ms, o.c->measured_ms, o.ratio(),
               o.c->network ? "" : o.chosen);
}

void report(const std::vector<Outcome>& outcomes, bool holdout) {
  const char* part = holdout ? "held-out" : "fit";
  std::vector<const Outcome*> conv, net;
  for (const Outcome& o : outcomes)
    if (o.c->holdout == holdout) (o.c->network ? net : conv).push_back(&o);

  // Convolution tasks by GPU, direction and family.
  fmt::print("\n## Convolution tasks, {} split, by GPU, direction and algorithm family\n\n", part);
  fmt::print("Family: of the measured algorithm, or of the model's fastest where the source timed the\n"
             "library's fastest (`fastest` rows). Error: |predicted/measured - 1|; bias: median predicted/measured.\n\n");
  fmt::print("| GPU | direction | family | cases | median error | p90 error | bias |\n|---|---|---|---|---|---|---|\n");
  std::map<std::string, std::vector<const Outcome*>> by_key, by_gpu;
  for (const Outcome* o : conv) {
    const std::string direction = conv_direction_name(o->c->convs.front().first.direction);
    by_key[o->c->device + "|" + direction + "|" + family_of(*o)].push_back(o);
    by_gpu[o->c->device].push_back(o);
  }
  for (const auto& [key, list] : by_key) {
    const Stats s = stats(list);
    const size_t a = key.find('|'), b = key.rfind('|');
    fmt::print("| {} | {} | {} | {} | {} | {} | {} |\n", key.substr(0, a), key.substr(a + 1, b - a - 1),
               key.substr(b + 1), s.n, pct(s.median_error), pct(s.p90_error), num(s.bias));
  }
  fmt::print("\n| GPU | conv cases | median error | p90 error | bias |\n|---|---|---|---|---|\n");
  for (const auto& [gpu, list] : by_gpu) {
    const Stats s = stats(list);
    fmt::print("| {} | {} | {} | {} | {} |\n", gpu, s.n, pct(s.median_error), pct(s.p90_error), num(s.bias));
  }
  const Stats all = stats(conv);
  fmt::print("| **all** | {} | **{}** | **{}** | {} |\n", all.n, pct(all.median_error), pct(all.p90_error),
             num(all.bias));

  // Networks.
  fmt::print("\n## Whole networks, {} split\n\n| GPU | library | network and pass | predicted ms | measured ms | ratio |\n"
             "|---|---|---|---|---|---|\n", part);
  std::map<std::string, std::vector<const Outcome*>> net_by_gpu;
  for (const Outcome* o : net) {
    fmt::print("| {} | {} | {} | {:.1f} | {:.1f} | {:.2f} |\n", o->c->device, o->c->library, o->c->label,
               o->predicted_ms, o->c->measured_ms, o->ratio());
    net_by_gpu[o->c->device].push_back(o);
  }
  fmt::print("\n| GPU | network cases | median error | max error | bias |\n|---|---|---|---|---|\n");
  for (const auto& [gpu, list] : net_by_gpu) {
    const Stats s = stats(list);
    fmt::print("| {} | {} | {} | {} | {} |\n", gpu, s.n, pct(s.median_error), pct(s.max_error), num(s.bias));
  }
  const Stats nets = stats(net);
  fmt::print("| **all** | {} | **{}** | **{}** | {} |\n", nets.n, pct(nets.median_error), pct(nets.max_error),
             num(nets.bias));

  // Targets (issue 13), on this split.
  bool bias_ok = true;
  for (const auto& [gpu, list] : by_gpu) {
    const Stats s = stats(list);
    bias_ok = bias_ok && s.bias >= 0.85 && s.bias <= 1.15;
  }
  fmt::print("\ntargets ({}): conv median {} (<= 20%: {}), conv p90 {} (<= 50%: {}), every GPU's conv bias in "
             "0.85-1.15: {}, every network within 20%: {}\n",
             part, pct(all.median_error), all.median_error <= 0.2 ? "yes" : "NO", pct(all.p90_error),
             all.p90_error <= 0.5 ? "yes" : "NO", bias_ok ? "yes" : "NO", nets.max_error <= 0.2 ? "yes" : "NO");
}

// Fastest forward algorithm: predicted against measured, over every layer
// with per-algorithm measurements (cases that name their algorithm).
void algorithm_agreement(const std::vector<Outcome>& outcomes) {
  std::map<std::string, std::vector<const Outcome*>> groups;  // device|library|layer|direction
  for (const Outcome& o : outcomes)
    if (!o.c->network && o.c->algorithm != "fastest")
      groups[o.c->device + "|" + o.c->library + "|" + o.c->label.substr(0, o.c->label.rfind(' '))].push_back(&o);
  fmt::print("\n## Fastest forward algorithm, predicted against measured\n\n"
             "| GPU | library | layer | measured fastest | predicted fastest (among the measured) | agree |\n"
             "|---|---|---|---|---|---|\n");
  int agree = 0, total = 0;
  for (const auto& [key, list] : groups) {
    if (list.front()->c->convs.front().first.direction != ConvDirection::forward || list.size() < 2) continue;
    const Outcome* measured = *std::min_element(list.begin(), list.end(), [](auto* a, auto* b) {
      return a->c->measured_ms < b->c->measured_ms;
    });
    const Outcome* predicted = *std::min_element(list.begin(), list.end(), [](auto* a, auto* b) {
      return a->predicted_ms < b->predicted_ms;
    });
    const bool same = measured == predicted;
    agree += same;
    ++total;
    fmt::print("| {} | {} | {} | {} | {} | {} |\n", measured->c->device, measured->c->library,
               measured->c->label.substr(0, measured->c->label.find(' ')), measured->c->algorithm,
               predicted->c->algorithm, same ? "yes" : "no");
  }
  fmt::print("\nagreement: {} of {} layers ({})\n", agree, total, total ? pct(static_cast<double>(agree) / total) : "-");
}

}  // namespace

int main(int argc, char** argv) {
  bool do_fit = false, write = false, list_cases = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--fit") do_fit = true;
    else if (arg == "--write") write = true;
    else if (arg == "--cases") list_cases = true;
    else {
      fmt::print(stderr, "calibration_bench: unknown argument '{}' (expected --fit, --write, --cases)\n", arg);
      return 2;
    }
  }
  if (write && !do_fit) {
    fmt::print(stderr, "calibration_bench: --write needs --fit\n");
    return 2;
  }
  const std::vector<Case> cases = load_cases(kDataDir, kSourceDir);
  Devices devices = load_case_devices(cases);
  ReleaseFactors release;
  fmt::print("# Calibration of the analytic cost model\n\n{} cases ({} held out) on {} GPUs, data in "
             "bench/data/calibration\n",
             cases.size(), std::count_if(cases.begin(), cases.end(), [](const Case& c) { return c.holdout; }),
             devices.size());
  if (do_fit) {
    const Params p = fit(cases, devices);
    apply(p, devices);
    release = p.release;
    if (write) {
      const std::vector<Outcome> outcomes = evaluate(cases, devices, release);
      write_arch_files(p, devices, fitted_on_text(cases, devices), held_out_text(outcomes, devices));
    }
  } else {
    release = fit_release_factors(cases, devices);
  }
  fmt::print("\nOld cuDNN releases' kernel speed factors (time multipliers, fitted on the fit split):");
  for (const auto& [key, factor] : release) fmt::print(" {} {:.2f};", key, factor);
  fmt::print("\n");
  const std::vector<Outcome> outcomes = evaluate(cases, devices, release);
  report(outcomes, true);
  report(outcomes, false);
  algorithm_agreement(outcomes);
  fmt::print("\n## Held-out error per architecture (the tables' held_out_error)\n\n");
  for (const auto& [arch, text] : held_out_text(outcomes, devices)) fmt::print("- {}: {}\n", arch, text);
  if (list_cases) print_cases(outcomes);
  return 0;
}

#include "runtime/lr_schedule.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>

namespace mplan::rt {
namespace {

constexpr double kPi = 3.14159265358979323846;

// OneCycleLR's _annealing_cos: from `start` at pct 0 to `end` at pct 1.
double annealing_cos(double start, double end, double pct) {
  return end + (start - end) / 2.0 * (std::cos(kPi * pct) + 1);
}

double onecycle_lr(const LrSchedule& s, double max_lr, int64_t u) {
  const double initial = max_lr / s.div;
  const double final_lr = initial / s.final_div;
  const double rise_end = s.pct * static_cast<double>(s.steps) - 1;  // PyTorch's phase 1 end_step
  const double t = static_cast<double>(std::min(u, s.steps - 1));
  if (t <= rise_end) return annealing_cos(initial, max_lr, t / rise_end);
  return annealing_cos(max_lr, final_lr, (t - rise_end) / (static_cast<double>(s.steps - 1) - rise_end));
}

double cosine_lr(const LrSchedule& s, double lr, int64_t u) {
  if (u < s.warmup)  // LinearLR(start_factor=start, end_factor=1, total_iters=warmup)
    return lr * (s.start + (1 - s.start) * static_cast<double>(u) / static_cast<double>(s.warmup));
  // CosineAnnealingLR(T_max = steps - warmup, eta_min = min_lr), from the warm-up's end.
  const double t_max = static_cast<double>(s.steps - s.warmup);
  const double t = std::min(static_cast<double>(u - s.warmup), t_max);
  return s.min_lr + (lr - s.min_lr) * (1 + std::cos(kPi * t / t_max)) / 2;
}

bool parse_count(const std::string& text, int64_t min, int64_t* out) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0' || v < min) return false;
  *out = v;
  return true;
}

bool parse_real(const std::string& text, double* out) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end == text.c_str() || *end != '\0' || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, sep)) parts.push_back(part);
  if (!text.empty() && text.back() == sep) parts.emplace_back();
  return parts;
}

}  // namespace

double lr_at(const LrSchedule& s, double lr, int64_t u) {
  switch (s.kind) {
    case LrSchedule::Kind::constant:
      return lr;
    case LrSchedule::Kind::step:
      return lr * std::pow(s.gamma, static_cast<double>(u / s.every));
    case LrSchedule::Kind::multistep: {
      const auto passed = std::upper_bound(s.milestones.begin(), s.milestones.end(), u) - s.milestones.begin();
      return lr * std::pow(s.gamma, static_cast<double>(passed));
    }
    case LrSchedule::Kind::cosine:
      return cosine_lr(s, lr, u);
    case LrSchedule::Kind::onecycle:
      return onecycle_lr(s, lr, u);
  }
  return lr;
}

std::optional<LrSchedule> parse_lr_schedule(const std::string& text, std::string* error) {
  const std::vector<std::string> parts = split(text, ',');
  LrSchedule s;
  const std::map<std::string, LrSchedule::Kind> kinds = {{"constant", LrSchedule::Kind::constant},
                                                         {"step", LrSchedule::Kind::step},
                                                         {"multistep", LrSchedule::Kind::multistep},
                                                         {"cosine", LrSchedule::Kind::cosine},
                                                         {"onecycle", LrSchedule::Kind::onecycle}};
  auto kind = parts.empty() ? kinds.end() : kinds.find(parts.front());
  if (kind == kinds.end()) {
    *error = "'" + text + "': expected constant, step, multistep, cosine or onecycle, then ,key=value pairs";
    return std::nullopt;
  }
  s.kind = kind->second;
  // The keys each kind takes, and the ones it needs.
  const std::map<LrSchedule::Kind, std::vector<std::string>> keys = {
      {LrSchedule::Kind::constant, {}},
      {LrSchedule::Kind::step, {"every", "gamma"}},
      {LrSchedule::Kind::multistep, {"milestones", "gamma"}},
      {LrSchedule::Kind::cosine, {"steps", "warmup", "start", "min"}},
      {LrSchedule::Kind::onecycle, {"steps", "pct", "div", "final_div"}}};
  const std::vector<std::string>& allowed = keys.at(s.kind);
  std::map<std::string, std::string> given;
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t eq = parts[i].find('=');
    const std::string key = parts[i].substr(0, eq);
    if (eq == std::string::npos || std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string list;
      for (const std::string& k : allowed) list += (list.empty() ? "" : ", ") + k + "=";
      *error = "'" + text + "': '" + parts[i] + "' is not a key of " + kind->first +
               (list.empty() ? " (it takes none)" : " (it takes " + list + ")");
      return std::nullopt;
    }
    if (!given.emplace(key, parts[i].substr(eq + 1)).second) {
      *error = "'" + text + "': " + key + "= is given twice";
      return std::nullopt;
    }
  }
  auto bad = [&](const std::string& key, const std::string& what) {
    *error = "'" + text + "': " + key + "=" + (given.count(key) ? given.at(key) : "") + ": expected " + what;
    return std::nullopt;
  };
  auto count = [&](const std::string& key, int64_t min, int64_t* out) {
    return !given.count(key) || parse_count(given.at(key), min, out);
  };
  auto real = [&](const std::string& key, double* out) { return !given.count(key) || parse_real(given.at(key), out); };
  auto need = [&](const std::string& key) {
    *error = "'" + text + "': " + kind->first + " needs " + key + "=";
    return std::nullopt;
  };
  switch (s.kind) {
    case LrSchedule::Kind::constant:
      break;
    case LrSchedule::Kind::step:
      if (!given.count("every")) return need("every");
      if (!count("every", 1, &s.every)) return bad("every", "a number of updates >= 1");
      if (!real("gamma", &s.gamma) || s.gamma < 0) return bad("gamma", "a finite factor >= 0");
      break;
    case LrSchedule::Kind::multistep: {
      if (!given.count("milestones")) return need("milestones");
      for (const std::string& m : split(given.at("milestones"), ':')) {
        int64_t v = 0;
        if (!parse_count(m, 1, &v) || (!s.milestones.empty() && v <= s.milestones.back()))
          return bad("milestones", "update counts >= 1 in ascending order, separated by ':'");
        s.milestones.push_back(v);
      }
      if (s.milestones.empty()) return bad("milestones", "update counts >= 1 in ascending order, separated by ':'");
      if (!real("gamma", &s.gamma) || s.gamma < 0) return bad("gamma", "a finite factor >= 0");
      break;
    }
    case LrSchedule::Kind::cosine:
      if (!given.count("steps")) return need("steps");
      if (!count("steps", 1, &s.steps)) return bad("steps", "a number of updates >= 1");
      if (!count("warmup", 0, &s.warmup) || s.warmup >= s.steps)
        return bad("warmup", "a number of updates >= 0 and below steps=");
      if (!real("start", &s.start) || !(s.start > 0 && s.start <= 1))
        return bad("start", "a factor in (0, 1], as LinearLR's start_factor");
      if (!real("min", &s.min_lr) || s.min_lr < 0) return bad("min", "a learning rate >= 0");
      break;
    case LrSchedule::Kind::onecycle:
      if (!given.count("steps")) return need("steps");
      if (!count("steps", 2, &s.steps)) return bad("steps", "a number of updates >= 2");
      if (!real("pct", &s.pct) || !(s.pct > 0 && s.pct < 1) || !(s.pct * static_cast<double>(s.steps) > 1))
        return bad("pct", "a share in (0, 1) of steps= that rises over more than one update");
      if (!real("div", &s.div) || !(s.div > 0)) return bad("div", "a factor > 0");
      if (!real("final_div", &s.final_div) || !(s.final_div > 0)) return bad("final_div", "a factor > 0");
      break;
  }
  return s;
}

std::string lr_schedule_text(const LrSchedule& s) {
  auto real = [](double v) {
    std::ostringstream out;
    out << v;
    return out.str();
  };
  switch (s.kind) {
    case LrSchedule::Kind::constant:
      return "constant";
    case LrSchedule::Kind::step:
      return "step,every=" + std::to_string(s.every) + ",gamma=" + real(s.gamma);
    case LrSchedule::Kind::multistep: {
      std::string m;
      for (int64_t v : s.milestones) m += (m.empty() ? "" : ":") + std::to_string(v);
      return "multistep,milestones=" + m + ",gamma=" + real(s.gamma);
    }
    case LrSchedule::Kind::cosine:
      return "cosine,steps=" + std::to_string(s.steps) + ",warmup=" + std::to_string(s.warmup) +
             ",start=" + real(s.start) + ",min=" + real(s.min_lr);
    case LrSchedule::Kind::onecycle:
      return "onecycle,steps=" + std::to_string(s.steps) + ",pct=" + real(s.pct) + ",div=" + real(s.div) +
             ",final_div=" + real(s.final_div);
  }
  return "constant";
}

}  // namespace mplan::rt

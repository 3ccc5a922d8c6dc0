#include "runtime/metrics_log.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace mplan::rt {
namespace {

std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", v);
  return text;
}

// A float's shortest decimal that reads back as the same float (the learning
// rate is a float: 0.005, not 0.00499999989).
std::string float_number(double v) {
  if (!std::isfinite(v)) return "null";
  const auto f = static_cast<float>(v);
  char text[32];
  for (int digits = 6; digits <= 9; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, static_cast<double>(f));
    if (std::strtof(text, nullptr) == f) break;
  }
  return text;
}

}  // namespace

std::string step_metrics_json(const StepMetrics& m) {
  std::string line = "{\"step\": " + std::to_string(m.step);
  if (m.epoch > 0) line += ", \"epoch\": " + std::to_string(m.epoch);
  line += ", \"loss\": " + number(m.loss) + ", \"lr\": " + float_number(m.lr) + ", \"ms\": " + number(m.ms) +
          ", \"samples_per_s\": " + number(m.samples_per_s);
  if (m.loss_scale) line += ", \"loss_scale\": " + number(*m.loss_scale);
  if (m.update_skipped) line += ", \"update_skipped\": true";
  if (m.gradient_norm) line += ", \"gradient_norm\": " + number(*m.gradient_norm);
  return line + "}";
}

std::string validation_metrics_json(const ValidationMetrics& m) {
  std::string line = "{\"step\": " + std::to_string(m.step);
  if (m.epoch > 0) line += ", \"epoch\": " + std::to_string(m.epoch);
  return line + ", \"val_loss\": " + number(m.loss) + ", \"val_top1\": " + number(m.top1) +
         ", \"val_top5\": " + number(m.top5) + ", \"val_samples\": " + std::to_string(m.samples) + "}";
}

MetricsLog::~MetricsLog() {
  if (file_ != nullptr) std::fclose(file_);
}

bool MetricsLog::open(const std::string& path, std::string* error) {
  std::error_code ec;
  if (path.empty() || path.back() == '/' || std::filesystem::is_directory(path, ec)) {
    *error = path + ": names a folder; give the name of the file to write";
    return false;
  }
  std::FILE* file = std::fopen(path.c_str(), "a");
  if (file == nullptr) {
    *error = path + ": cannot be opened for appending (" + std::strerror(errno) + ")";
    return false;
  }
  if (file_ != nullptr) std::fclose(file_);
  file_ = file;
  path_ = path;
  return true;
}

void MetricsLog::write(const StepMetrics& m) { append(step_metrics_json(m) + "\n", m.step); }
void MetricsLog::write(const ValidationMetrics& m) { append(validation_metrics_json(m) + "\n", m.step); }

void MetricsLog::append(const std::string& line, int64_t step) {
  if (file_ == nullptr || !error_.empty()) return;
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    error_ = path_ + ": a write failed (" + std::string(std::strerror(errno)) + "); the log ends at step " +
             std::to_string(step);
}

}  // namespace mplan::rt

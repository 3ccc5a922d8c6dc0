#include "planner/memory_svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/bytes.h"
#include "planner/trace.h"

namespace mplan {

namespace {

constexpr double kWidth = 960, kHeight = 540;
constexpr double kLeft = 90, kRight = 30, kTop = 72, kBottom = 64;
constexpr double kPlotWidth = kWidth - kLeft - kRight, kPlotHeight = kHeight - kTop - kBottom;

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// A round tick step (1, 2 or 5 times a power of ten) giving about `ticks` ticks over `range`.
double nice_step(double range, int ticks) {
  if (!(range > 0)) return 1;
  const double raw = range / ticks;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * magnitude >= raw) return m * magnitude;
  }
  return 10 * magnitude;
}

struct Unit {
  double scale;
  const char* name;
};

Unit byte_unit(int64_t bytes) {
  if (bytes >= (int64_t{1} << 30)) return {double(int64_t{1} << 30), "GiB"};
  if (bytes >= (int64_t{1} << 20)) return {double(int64_t{1} << 20), "MiB"};
  if (bytes >= (int64_t{1} << 10)) return {1024.0, "KiB"};
  return {1.0, "B"};
}

std::string number(double v) { return fmt::format("{:.2f}", v); }

}  // namespace

std::string plan_memory_svg(const Plan& plan) {
  const std::vector<ArenaSample> samples = arena_usage(plan);
  double end_ms = plan.summary.simulated_ms;
  for (const Step& s : plan.steps) end_ms = std::max(end_ms, s.end_ms);
  for (const ArenaSample& s : samples) end_ms = std::max(end_ms, s.time_ms);
  if (!(end_ms > 0)) end_ms = 1;

  int64_t peak = 0;
  for (const ArenaSample& s : samples) peak = std::max(peak, s.bytes);
  const int64_t resident = plan.resident_region_bytes;
  const int64_t top_bytes = std::max({plan.budget_bytes, resident + peak, int64_t{1}});
  const double y_max = static_cast<double>(top_bytes) * 1.08;

  auto x_of = [&](double ms) { return kLeft + kPlotWidth * std::clamp(ms / end_ms, 0.0, 1.0); };
  auto y_of = [&](double bytes) { return kTop + kPlotHeight * (1.0 - std::clamp(bytes / y_max, 0.0, 1.0)); };

  std::string svg;
  svg += fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n",
      kWidth, kHeight);
  svg += fmt::format("<rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"white\"/>\n", kWidth, kHeight);

  // Title: model, budget, sub-batch.
  std::string sub_batches;
  if (plan.sub_batches.size() > 1) {
    std::vector<std::string> parts;
    for (int64_t b : plan.sub_batches) parts.push_back(std::to_string(b));
    sub_batches = fmt::format(" x {} rounds [{}]", plan.sub_batches.size(), fmt::join(parts, ", "));
  }
  svg += fmt::format("<text x=\"{}\" y=\"26\" font-size=\"17\" font-weight=\"bold\">{}</text>\n", kLeft,
                     xml_escape(fmt::format("{}: device memory over one iteration", plan.model_name)));
  svg += fmt::format("<text x=\"{}\" y=\"46\" font-size=\"12\" fill=\"#444\">{}</text>\n", kLeft,
                     xml_escape(fmt::format("budget {}, batch {}, sub-batch {}{}; most arena in use {}; {}",
                                            format_bytes(plan.budget_bytes), plan.batch, plan.sub_batch,
                                            sub_batches, format_bytes(peak), plan.device)));

  // Axes and grid.
  const Unit unit = byte_unit(top_bytes);
  const double y_step = nice_step(y_max / unit.scale, 6);
  svg += "<g stroke=\"#e4e4e4\" stroke-width=\"1\">\n";
  for (double v = 0; v * unit.scale <= y_max; v += y_step) {
    svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n", kLeft, number(y_of(v * unit.scale)),
                       kLeft + kPlotWidth, number(y_of(v * unit.scale)));
  }
  svg += "</g>\n<g fill=\"#333\" text-anchor=\"end\">\n";
  for (double v = 0; v * unit.scale <= y_max; v += y_step) {
    svg += fmt::format("<text x=\"{}\" y=\"{}\">{:g} {}</text>\n", kLeft - 6, number(y_of(v * unit.scale) + 4), v,
                       unit.name);
  }
  svg += "</g>\n";
  const bool seconds = end_ms >= 10000;
  const double time_scale = seconds ? 1000.0 : 1.0;
  const double x_step = nice_step(end_ms / time_scale, 8);
  svg += "<g fill=\"#333\" text-anchor=\"middle\">\n";
  for (double v = 0; v * time_scale <= end_ms * 1.0000001; v += x_step) {
    const double x = x_of(v * time_scale);
    svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#999\"/>\n", number(x),
                       kTop + kPlotHeight, kTop + kPlotHeight + 5);
    svg += fmt::format("<text x=\"{}\" y=\"{}\">{:g} {}</text>\n", number(x), kTop + kPlotHeight + 19, v,
                       seconds ? "s" : "ms");
  }
  svg += "</g>\n";
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#333\">simulated time</text>\n",
                     kLeft + kPlotWidth / 2, kHeight - 18);
  svg += fmt::format(
      "<text transform=\"translate(22,{}) rotate(-90)\" text-anchor=\"middle\" fill=\"#333\">device memory</text>\n",
      kTop + kPlotHeight / 2);

  // The resident region: a band from 0.
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#c8c8c8\"/>\n", kLeft,
                     number(y_of(static_cast<double>(resident))), kPlotWidth,
                     number(y_of(0) - y_of(static_cast<double>(resident))));

  // Arena in use, stacked on the resident region, as a step area. Past a few
  // samples per pixel, each pixel column keeps its highest value (peaks stay visible).
  std::vector<ArenaSample> points;
  const size_t columns = static_cast<size_t>(kPlotWidth);
  if (samples.size() <= 4 * columns) {
    points = samples;
  } else {
    size_t i = 0;
    for (size_t c = 0; c < columns && i < samples.size(); ++c) {
      const double column_end_ms = end_ms * static_cast<double>(c + 1) / static_cast<double>(columns);
      ArenaSample highest{samples[i].time_ms, samples[i].bytes};
      int64_t last = samples[i].bytes;
      for (; i < samples.size() && (samples[i].time_ms < column_end_ms || c + 1 == columns); ++i) {
        highest.bytes = std::max(highest.bytes, samples[i].bytes);
        last = samples[i].bytes;
      }
      points.push_back(highest);
      if (last != highest.bytes) points.push_back({std::min(column_end_ms, end_ms), last});
    }
  }
  std::string path = fmt::format("M{},{}", number(x_of(0)), number(y_of(static_cast<double>(resident))));
  double previous = static_cast<double>(resident);
  for (const ArenaSample& p : points) {
    const double y = static_cast<double>(resident + p.bytes);
    path += fmt::format(" L{},{} L{},{}", number(x_of(p.time_ms)), number(y_of(previous)), number(x_of(p.time_ms)),
                        number(y_of(y)));
    previous = y;
  }
  path += fmt::format(" L{},{} L{},{} Z", number(x_of(end_ms)), number(y_of(previous)), number(x_of(end_ms)),
                      number(y_of(static_cast<double>(resident))));
  svg += fmt::format("<path d=\"{}\" fill=\"#9ecae1\" stroke=\"#3182bd\" stroke-width=\"1\"/>\n", path);

  // Budget and resident lines, labelled.
  const double budget_y = y_of(static_cast<double>(plan.budget_bytes));
  svg += fmt::format(
      "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#d62728\" stroke-width=\"1.5\" "
      "stroke-dasharray=\"6,4\"/>\n",
      kLeft, number(budget_y), kLeft + kPlotWidth);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"#d62728\">{}</text>\n",
                     kLeft + kPlotWidth - 4, number(budget_y - 5),
                     xml_escape("budget " + format_bytes(plan.budget_bytes)));
  const double resident_y = y_of(static_cast<double>(resident));
  svg += fmt::format(
      "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#555\" stroke-width=\"1\" "
      "stroke-dasharray=\"3,3\"/>\n",
      kLeft, number(resident_y), kLeft + kPlotWidth);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"#333\">{}</text>\n", kLeft + 6,
                     number(std::min(resident_y + 15, y_of(0) - 4)),
                     xml_escape("resident " + format_bytes(resident) + " (weights, dW, optimizer state)"));
  // Legend for the area.
  svg += fmt::format("<rect x=\"{}\" y=\"54\" width=\"12\" height=\"10\" fill=\"#9ecae1\" stroke=\"#3182bd\"/>\n",
                     kLeft + kPlotWidth - 240);
  svg += fmt::format("<text x=\"{}\" y=\"63\" fill=\"#333\">arena in use (live buffers)</text>\n",
                     kLeft + kPlotWidth - 222);
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n", kLeft,
                     kTop, kPlotWidth, kPlotHeight);
  svg += "</svg>\n";
  return svg;
}

}  // namespace mplan

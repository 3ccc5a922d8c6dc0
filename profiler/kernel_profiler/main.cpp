// mplan_kernel_profiler: times a job file's kernels on this build's runtime
// backend and writes a result file (runtime/jobs.h) for `mplan profile --merge`.
// Built from the runtime alone (no YAML, GLPK, Boost, fmt or JSON library), so
// it builds and runs on a GPU node that has only CUDA and cuDNN
// (docs/profile-format.md, "Measuring on a GPU node").
//
//   mplan_kernel_profiler JOBS.json -o TIMES.json [--quiet]
//
// Exit codes: 0 written (jobs that could not run carry an error in the file);
// 1 the backend has no device, or the result file could not be written;
// 2 bad arguments or a bad job file.

#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "profiler/kernel_profiler/profile_jobs.h"
#include "runtime/device.h"
#include "runtime/jobs.h"

namespace {

constexpr const char* kUsage =
    "usage: mplan_kernel_profiler JOBS.json -o TIMES.json [--quiet] [--cold-cache MIB]\n"
    "  Times every job of JOBS.json (written by `mplan profile --jobs`) on this build's\n"
    "  runtime backend and writes TIMES.json for `mplan profile --merge`.\n"
    "  --quiet   no progress lines on stderr\n"
    "  --cold-cache MIB  overwrite MIB of device memory before every timed run (more than\n"
    "            the GPU's L2), so that no run finds its operands in the cache\n";

int fail(int code, const std::string& message) {
  std::fprintf(stderr, "mplan_kernel_profiler: %s\n", message.c_str());
  return code;
}

bool read_text(const std::string& path, std::string* text, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) {
    *error = path + ": cannot read";
    return false;
  }
  *text = buffer.str();
  return true;
}

// Written whole or not at all: a temporary file renamed into place.
bool write_text(const std::string& path, const std::string& text, std::string* error) {
  const std::string temp = path + ".partial";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) {
      *error = temp + ": cannot create: " + std::strerror(errno);
      return false;
    }
    out << text;
    out.flush();
    if (!out) {
      *error = temp + ": cannot write";
      std::remove(temp.c_str());
      return false;
    }
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    *error = path + ": cannot rename the result into place: " + std::strerror(errno);
    std::remove(temp.c_str());
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string jobs_path, out_path;
  bool quiet = false;
  long flush_mib = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "-o" || arg == "--output") {
      if (i + 1 >= argc) return fail(2, std::string(arg) + " needs a file name\n" + kUsage);
      out_path = argv[++i];
    } else if (arg == "--quiet") {
      quiet = true;
    } else if (arg == "--cold-cache") {
      if (i + 1 >= argc) return fail(2, "--cold-cache needs a size in MiB\n" + std::string(kUsage));
      char* end = nullptr;
      const long mib = std::strtol(argv[++i], &end, 10);
      if (end == argv[i] || *end != '\0' || mib <= 0 || mib > 65536)
        return fail(2, "--cold-cache: expected MiB from 1 to 65536, got '" + std::string(argv[i]) + "'\n" + kUsage);
      flush_mib = mib;
    } else if (!arg.empty() && arg[0] == '-') {
      return fail(2, "unknown option " + arg + "\n" + kUsage);
    } else if (jobs_path.empty()) {
      jobs_path = arg;
    } else {
      return fail(2, "one job file only (got " + jobs_path + " and " + arg + ")\n" + kUsage);
    }
  }
  if (jobs_path.empty() || out_path.empty()) return fail(2, std::string("needs a job file and -o\n") + kUsage);

  std::string text, error;
  if (!read_text(jobs_path, &text, &error)) return fail(2, error);
  mplan::rt::JobFile jobs;
  if (!mplan::rt::parse_jobs(text, &jobs, &error)) return fail(2, jobs_path + ": " + error);

  const mplan::rt::BackendInfo backend = mplan::rt::backend_info();
  if (backend.memory_bytes <= 0)
    return fail(1, "the " + backend.backend + " backend has no device to profile on: " + backend.device);
  // The kernels run in the job file's math, the model's (tf32: tensor cores).
  if (!mplan::rt::set_math_mode(jobs.math, &error)) return fail(2, jobs_path + ": math " + jobs.math + ": " + error);

  mplan::kernel_profiler::ProfileOptions options;
  options.flush_bytes = static_cast<int64_t>(flush_mib) << 20;
  if (!quiet) options.progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  const mplan::rt::ResultFile results = mplan::kernel_profiler::profile_jobs(jobs, options);
  if (!write_text(out_path, mplan::rt::results_to_json(results), &error)) return fail(1, error);
  int failed = 0;
  for (const mplan::rt::JobResult& r : results.results) failed += r.error.empty() ? 0 : 1;
  if (!quiet)
    std::fprintf(stderr, "wrote %s: %zu jobs (%d could not run here), %zu copy sizes\n", out_path.c_str(),
                 results.results.size(), failed, results.copies.size());
  return 0;
}

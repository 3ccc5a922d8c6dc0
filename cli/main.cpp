// mplan: the command line. It only parses arguments and calls the stages;
// each sub-command lives in its own cli/cmd_<name>.cpp.

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <new>

#include "cli/command.h"
#include "driver/paths.h"
#include "codegen/output_dir.h"
#include "profiler/profile.h"
#include "tdfg/tdfg.h"

namespace mplan::cli {

std::vector<RegisteredCommand>& registered_commands() {
  static std::vector<RegisteredCommand> commands;
  return commands;
}

Registration::Registration(std::string name, std::string description, Setup setup, int order) {
  registered_commands().push_back({std::move(name), std::move(description), std::move(setup), order});
}

int exit_code_of(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::bad_input: return kExitBadInput;
    case ErrorKind::usage: return kExitUsage;
    case ErrorKind::infeasible: return kExitInfeasible;
    case ErrorKind::io: return kExitIo;
    case ErrorKind::internal: return kExitInternal;
  }
  return kExitInternal;
}

void fail(const Error& error) { throw CommandFailed{error.to_string(), exit_code_of(error.kind)}; }
void fail(const std::string& message, ErrorKind kind) { throw CommandFailed{message, exit_code_of(kind)}; }
void fail_usage(const std::string& message) { throw CommandFailed{message, kExitUsage}; }

void write_file_atomically(const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) fail(fmt::format("cannot write '{}': {}", path, std::strerror(EISDIR)), ErrorKind::io);
  // A name of our own beside the target: the rename below is atomic only
  // within one folder (one file system).
  const std::string temporary = fmt::format("{}.tmp-{}", path, static_cast<long>(::getpid()));
  ::unlink(temporary.c_str());  // a stale one of an earlier process with our pid
  int error = codegen::write_new_file_durably(temporary, text);
  if (error == ENOENT) {
    fail(fmt::format("cannot write '{}': its folder does not exist", path), ErrorKind::io);
  }
  if (error == 0 && ::rename(temporary.c_str(), path.c_str()) != 0) error = errno;
  if (error != 0) {
    ::unlink(temporary.c_str());
    fail(fmt::format("cannot write '{}': {}", path, std::strerror(error)), ErrorKind::io);
  }
}

void refuse_overwriting_inputs(const std::string& flag, const std::string& output,
                               const std::vector<std::string>& inputs, bool output_is_folder) {
  if (Status s = driver::refuse_overwriting_inputs(flag, output, inputs, output_is_folder); !s) fail(s.error());
}

}  // namespace mplan::cli

int main(int argc, char** argv) {
  using namespace mplan::cli;
  CLI::App app{"mplan: plans and compiles DNN training for a GPU whose memory is too small.\n"
               "See README.md and docs/ for the file formats and every flag."};
  app.name("mplan");
  app.require_subcommand(1);
  app.set_version_flag("--version", "mplan 0.1.0");
  auto& commands = registered_commands();
  std::stable_sort(commands.begin(), commands.end(),
                   [](const auto& a, const auto& b) { return a.order < b.order; });
  for (auto& command : commands) command.setup(*app.add_subcommand(command.name, command.description));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // Without a command (`mplan`, `mplan --frob`), show what the commands are.
    if (app.get_subcommands().empty()) {
      std::fprintf(stderr, "%s\n", app.help().c_str());
      if (argc > 1 && argv[1][0] != '-') {  // CLI11 would only say "A subcommand is required"
        std::string names;
        for (const auto& command : commands) names += (names.empty() ? "" : ", ") + command.name;
        std::fprintf(stderr, "mplan: error: unknown command '%s' (expected one of: %s)\n", argv[1], names.c_str());
        return kExitUsage;
      }
    }
    std::fprintf(stderr, "mplan: error: ");
    app.exit(e);
    return kExitUsage;
  } catch (const CommandFailed& e) {
    std::fprintf(stderr, "mplan: error: %s\n", e.message.c_str());
    return e.exit_code;
  } catch (const std::bad_alloc&) {
    // Inputs are bounded so that this does not happen; if it does, it is a
    // bug to report, not a crash.
    std::fprintf(stderr,
                 "mplan: internal error: ran out of memory; please report this with the command and its input "
                 "files\n");
    return kExitInternal;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mplan: internal error: %s; please report this with the command and its input files\n",
                 e.what());
    return kExitInternal;
  } catch (...) {
    std::fprintf(stderr, "mplan: internal error: an unknown exception; please report this\n");
    return kExitInternal;
  }
  return 0;
}

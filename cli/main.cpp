// mplan: the command line. It only parses arguments and calls the stages;
// each sub-command lives in its own cli/cmd_<name>.cpp.

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cli/command.h"

namespace mplan::cli {

std::vector<RegisteredCommand>& registered_commands() {
  static std::vector<RegisteredCommand> commands;
  return commands;
}

Registration::Registration(std::string name, std::string description, Setup setup, int order) {
  registered_commands().push_back({std::move(name), std::move(description), std::move(setup), order});
}

void fail(const Error& error) { throw CommandFailed{error.to_string()}; }
void fail(const std::string& message) { throw CommandFailed{message}; }

void write_file_atomically(const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  fs::path target(path);
  fs::path temporary = target;
  temporary += ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) fail(fmt::format("cannot write '{}': the folder does not exist or is not writable", path));
    out << text;
    out.flush();
    if (!out) {
      std::error_code ignored;
      fs::remove(temporary, ignored);
      fail(fmt::format("cannot write '{}': the write failed (disk full?)", path));
    }
  }
  std::error_code error;
  fs::rename(temporary, target, error);
  if (error) {
    std::error_code ignored;  // keep `error` for the message: the rename's reason
    fs::remove(temporary, ignored);
    fail(fmt::format("cannot write '{}': {}", path, error.message()));
  }
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
        return e.get_exit_code();
      }
    }
    std::fprintf(stderr, "mplan: error: ");
    return app.exit(e);
  } catch (const CommandFailed& e) {
    std::fprintf(stderr, "mplan: error: %s\n", e.message.c_str());
    return e.exit_code;
  }
  return 0;
}

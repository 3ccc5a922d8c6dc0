// One rank's MPI (runtime/mpi/mpi_world.h).

#include "runtime/mpi/mpi_world.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <unistd.h>

namespace mplan::rt {
namespace {

constexpr int kExchangeTag = 11;
constexpr int kBroadcastTag = 12;

// What a rank says when the launcher ends it (mpirun sends SIGTERM to every
// rank once one has died or called MPI_Abort): written by the handler with
// write(2), so it is made before.
char g_terminated_message[256];

extern "C" void on_terminate(int signal_number) {
  const ssize_t ignored = ::write(STDERR_FILENO, g_terminated_message, std::strlen(g_terminated_message));
  (void)ignored;
  ::_exit(128 + signal_number);
}

// Whether an MPI launcher started this process: mpirun (Open MPI), Hydra
// (MPICH) or a PMIx/PMI launcher such as srun. Without one, MPI_Init would
// make a singleton world of one rank (Open MPI may even try to start its
// daemon), so a multi-rank program refuses instead.
bool started_by_launcher() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

}  // namespace

std::string rank_list(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

std::unique_ptr<MpiWorld> MpiWorld::start(int* argc, char*** argv, std::string* error) {
  if (!started_by_launcher()) {
    *error = "this program trains on several ranks (data parallel) and was not started by an MPI launcher; start "
             "it with mpirun -np <ranks> (docs/generated-program.md, \"Several ranks\")";
    return nullptr;
  }
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
    *error = "MPI_Init_thread failed";
    return nullptr;
  }
  std::unique_ptr<MpiWorld> world(new MpiWorld());
  MPI_Comm_rank(MPI_COMM_WORLD, &world->rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world->ranks_);
  if (provided < MPI_THREAD_SERIALIZED) {
    *error = "the MPI library does not allow calls from more than one thread (MPI_THREAD_SERIALIZED)";
    return nullptr;
  }
  MPI_Comm_dup(MPI_COMM_WORLD, &world->host_comm_);
  MPI_Comm_dup(MPI_COMM_WORLD, &world->gradient_comm_);
  // Errors are the watchdog's to report, not MPI's default handler's.
  MPI_Comm_set_errhandler(world->host_comm_, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(world->gradient_comm_, MPI_ERRORS_RETURN);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world->rank_, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &world->local_rank_);
  MPI_Comm_free(&node);
  std::snprintf(g_terminated_message, sizeof g_terminated_message,
                "train: rank %d: error: ended by the launcher (SIGTERM): another rank failed or was killed; see its "
                "message and mpirun's\n",
                world->rank_);
  std::signal(SIGTERM, on_terminate);
  return world;
}

MpiWorld::~MpiWorld() { finalize(); }

void MpiWorld::wait(std::vector<MPI_Request>& requests, const std::vector<int>& peers, const std::string& what) {
  const auto started = std::chrono::steady_clock::now();
  std::vector<bool> done(requests.size(), false);
  size_t left = requests.size();
  for (int polls = 0; left > 0; ++polls) {
    for (size_t i = 0; i < requests.size(); ++i) {
      if (done[i]) continue;
      int flag = 0;
      if (MPI_Test(&requests[i], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        abort(what + " failed: MPI reported an error exchanging with rank " + std::to_string(peers[i]), 1);
      if (flag) {
        done[i] = true;
        --left;
      }
    }
    if (left == 0) break;
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (waited > timeout_s_) {
      std::vector<int> missing;
      for (size_t i = 0; i < requests.size(); ++i)
        if (!done[i] && std::find(missing.begin(), missing.end(), peers[i]) == missing.end())
          missing.push_back(peers[i]);
      std::sort(missing.begin(), missing.end());
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", timeout_s_);
      abort("error: " + what + " timed out after " + seconds + " s waiting for " + rank_list(missing) +
                " (a rank died or hangs; --collective-timeout sets the limit)",
            1);
    }
    // Spin briefly (a step's messages arrive within microseconds), then yield
    // the core to the rank's own threads.
    if (polls > 64) std::this_thread::sleep_for(std::chrono::microseconds(polls > 4096 ? 1000 : 50));
  }
}

void MpiWorld::exchange(const void* mine, size_t bytes, void* all, const char* what) {
  auto* out = static_cast<std::byte*>(all);
  std::memcpy(out + static_cast<size_t>(rank_) * bytes, mine, bytes);
  std::vector<MPI_Request> requests;
  std::vector<int> peers;
  for (int q = 0; q < ranks_; ++q) {
    if (q == rank_) continue;
    requests.emplace_back();
    MPI_Irecv(out + static_cast<size_t>(q) * bytes, static_cast<int>(bytes), MPI_BYTE, q, kExchangeTag, host_comm_,
              &requests.back());
    peers.push_back(q);
    requests.emplace_back();
    MPI_Isend(mine, static_cast<int>(bytes), MPI_BYTE, q, kExchangeTag, host_comm_, &requests.back());
    peers.push_back(q);
  }
  wait(requests, peers, what);
}

void MpiWorld::broadcast(void* data, size_t bytes, const char* what) {
  std::vector<MPI_Request> requests;
  std::vector<int> peers;
  // Messages of at most 1 GiB (an int count of bytes).
  constexpr size_t kPiece = size_t{1} << 30;
  for (size_t at = 0; at < bytes; at += kPiece) {
    const int count = static_cast<int>(std::min(kPiece, bytes - at));
    auto* piece = static_cast<std::byte*>(data) + at;
    if (rank_ == 0) {
      for (int q = 1; q < ranks_; ++q) {
        requests.emplace_back();
        MPI_Isend(piece, count, MPI_BYTE, q, kBroadcastTag, host_comm_, &requests.back());
        peers.push_back(q);
      }
    } else {
      requests.emplace_back();
      MPI_Irecv(piece, count, MPI_BYTE, 0, kBroadcastTag, host_comm_, &requests.back());
      peers.push_back(0);
    }
  }
  wait(requests, peers, what);
}

void MpiWorld::abort(const std::string& message, int exit_code) {
  std::fflush(stdout);
  std::fprintf(stderr, "train: rank %d: %s\n", rank_, message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

void MpiWorld::finalize() {
  if (finalized_) return;
  finalized_ = true;
  std::signal(SIGTERM, SIG_DFL);
  if (host_comm_ != MPI_COMM_NULL) MPI_Comm_free(&host_comm_);
  if (gradient_comm_ != MPI_COMM_NULL) MPI_Comm_free(&gradient_comm_);
  MPI_Finalize();
}

}  // namespace mplan::rt

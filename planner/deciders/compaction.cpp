#include "planner/deciders/compaction.h"

#include <algorithm>
#include <tuple>

namespace mplan {
namespace {

// One arena segment as compaction sees it.
struct Piece {
  int64_t begin = 0, end = 0;
  bool free = false;
  int32_t instance = -1;     // a block that may move; -1: none
  double written_ms = 0;     // its last writer's end: its move follows it
  double users_end_ms = 0;   // the last end of its users (free: of the freed range's): the window's writer follows
  int64_t bytes() const { return end - begin; }
  bool movable() const { return instance >= 0; }
};

double last_end_ms(const StreamTimeline& timeline, const SlotSteps& steps) {
  double end = 0;
  for (int32_t s : steps)
    if (s >= 0) end = std::max(end, timeline.step(s).end_ms);
  return end;
}

std::vector<Piece> pieces_of(IterationSim& sim) {
  const StreamTimeline& timeline = sim.timeline();
  std::vector<Piece> pieces;
  for (const auto& [begin, seg] : sim.memory().by_address()) {
    Piece p;
    p.begin = seg.begin;
    p.end = seg.end;
    if (seg.free()) {
      p.free = true;
      p.users_end_ms = last_end_ms(timeline, sim.freed_ranges().users_in(seg.begin, seg.end));
    } else if (IterationSim::is_buffer(seg.owner)) {
      const BufferState& bs = sim.buffer_state(seg.owner);
      const int32_t inst = bs.instance;
      if (inst >= 0 && !bs.in_pool && sim.state(inst).created && sim.state(inst).buffer == seg.owner) {
        p.instance = inst;
        p.written_ms = bs.last_writer >= 0 ? timeline.step(bs.last_writer).end_ms : 0;
        p.users_end_ms = last_end_ms(timeline, bs.users);
      }
    }
    pieces.push_back(p);
  }
  return pieces;
}

// Window [i, j) of `pieces`: places its blocks in the free pieces outside it
// (largest first, best fit) and times the moves; false where one finds no place.
bool plan_window(IterationSim& sim, const std::vector<Piece>& pieces, size_t i, size_t j, const RoomRequest& request,
                 Compaction* out) {
  struct Room {
    int64_t next = 0, end = 0;
    double users_end_ms = 0;
  };
  std::vector<Room> rooms;
  for (size_t k = 0; k < pieces.size(); ++k)
    if (pieces[k].free && (k < i || k >= j)) rooms.push_back({pieces[k].begin, pieces[k].end, pieces[k].users_end_ms});
  std::vector<size_t> moved;
  double window_users_end_ms = 0;
  for (size_t k = i; k < j; ++k) {
    window_users_end_ms = std::max(window_users_end_ms, pieces[k].users_end_ms);
    if (pieces[k].movable()) moved.push_back(k);
  }
  std::stable_sort(moved.begin(), moved.end(),
                   [&](size_t a, size_t b) { return pieces[a].bytes() > pieces[b].bytes(); });
  const StreamTimeline& timeline = sim.timeline();
  double compute_free_ms = timeline.free_at_ms(kComputeSlot);
  Compaction c;
  c.found = true;
  c.begin = pieces[i].begin;
  for (size_t k : moved) {
    const Piece& p = pieces[k];
    Room* best = nullptr;
    for (Room& r : rooms)
      if (r.end - r.next >= p.bytes() && (best == nullptr || r.end - r.next < best->end - best->next)) best = &r;
    if (best == nullptr) return false;
    c.moves.emplace_back(p.instance, best->next);
    best->next += p.bytes();
    c.bytes += sim.instance_bytes(p.instance);
    const double start_ms = std::max({compute_free_ms, p.written_ms, best->users_end_ms});
    compute_free_ms = start_ms + sim.move_ms(sim.instance_bytes(p.instance));
  }
  const double writer_free_ms = timeline.free_at_ms(request.writer_slot);
  const double ready_ms = std::max({writer_free_ms, compute_free_ms, window_users_end_ms});
  c.delay_ms = ready_ms - writer_free_ms;
  *out = std::move(c);
  return true;
}

}  // namespace

Compaction find_compaction(IterationSim& sim, const RoomRequest& request) {
  Compaction best;
  const int64_t need = sim.reserved_bytes(request.bytes);
  if (sim.memory().free_bytes() < need) return best;
  const std::vector<Piece> pieces = pieces_of(sim);
  auto key = [](const Compaction& c) { return std::make_tuple(c.delay_ms, c.bytes, c.begin); };
  const size_t n = pieces.size();
  for (size_t i = 0; i < n; ++i) {
    if (!pieces[i].free && !pieces[i].movable()) continue;
    size_t j = i;
    while (j < n && (pieces[j].free || pieces[j].movable()) && pieces[j].begin - pieces[i].begin < need) ++j;
    if (j == i || pieces[j - 1].end - pieces[i].begin < need) continue;
    Compaction c;
    if (plan_window(sim, pieces, i, j, request, &c) && (!best.found || key(c) < key(best))) best = std::move(c);
  }
  return best;
}

int64_t apply_compaction(IterationSim& sim, const Compaction& compaction) {
  for (const auto& [inst, offset] : compaction.moves) sim.move(inst, offset);
  return compaction.begin;
}

}  // namespace mplan

#pragma once
// The planner's device memory manager (moDNN §III-B, "a linked list based
// approach"): the arena [0, capacity) is tiled by segments in address order,
// each free or used by one allocation. Plain data in and out, as in Glow and
// TFLite: an allocation is {id, size}, a segment is [begin, end).
//
// Placement is best-fit: the smallest free segment that holds the (aligned)
// size, the lowest address among equals; the block goes at the segment's
// start. Freeing coalesces with free neighbours. Every operation is
// O(log segments). The manager also reports the peak (highest end ever used)
// and the peak of live bytes, the lower bound any placement needs, so that
// fragmentation = peak / peak_live - 1.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mplan {

using AllocationId = int32_t;
inline constexpr AllocationId kFreeSegment = -1;

struct Segment {
  int64_t begin = 0;
  int64_t end = 0;  // exclusive
  AllocationId owner = kFreeSegment;
  int64_t bytes() const { return end - begin; }
  bool free() const { return owner == kFreeSegment; }
  bool operator==(const Segment&) const = default;
};

class MemoryManager {
 public:
  // capacity_bytes is rounded down to the alignment.
  explicit MemoryManager(int64_t capacity_bytes, int64_t alignment_bytes = 256);

  // Places `size_bytes` (rounded up to the alignment; 0 takes one alignment
  // unit so every allocation has a distinct address) and returns its offset,
  // or nothing when no free segment is large enough. The id must not be live.
  std::optional<int64_t> allocate(AllocationId id, int64_t size_bytes);
  // Allocations of at least `bytes` (0: none, the default) go to the top
  // end of their best-fit segment instead of its start, so large blocks stack
  // from the top of the arena and small ones from the bottom, and a hole left
  // by a small block does not split the room large ones need.
  void place_large_at_top(int64_t bytes) { large_bytes_ = bytes; }
  // Places the allocation at `offset`, which must lie in a free range large enough.
  void allocate_at(AllocationId id, int64_t size_bytes, int64_t offset);
  // Frees a live allocation and coalesces.
  void free(AllocationId id);

  bool live(AllocationId id) const { return used_.count(id) != 0; }
  int64_t offset_of(AllocationId id) const;
  // The aligned size the manager reserves for `size_bytes`.
  int64_t reserved_bytes(int64_t size_bytes) const;
  // Whether an allocation of size_bytes would succeed now.
  bool fits(int64_t size_bytes) const { return reserved_bytes(size_bytes) <= largest_free_bytes(); }
  int64_t largest_free_bytes() const;

  int64_t capacity_bytes() const { return capacity_; }
  int64_t alignment_bytes() const { return alignment_; }
  int64_t live_bytes() const { return live_bytes_; }            // reserved bytes in use now
  int64_t free_bytes() const { return capacity_ - live_bytes_; }
  int64_t peak_bytes() const { return peak_end_; }              // highest end ever used
  int64_t peak_live_bytes() const { return peak_live_; }        // most reserved bytes live at once
  // peak_bytes / peak_live_bytes - 1; 0 when nothing was ever allocated.
  double fragmentation() const;
  int32_t segment_count() const { return static_cast<int32_t>(segments_.size()); }

  // The segments in address order (they tile [0, capacity)).
  std::vector<Segment> segments() const;
  // Address-ordered access for searches that walk the list (offload schemes).
  const std::map<int64_t, Segment>& by_address() const { return segments_; }

 private:
  void insert_free(int64_t begin, int64_t end);
  void erase_free(const Segment& s);

  int64_t capacity_;
  int64_t alignment_;
  std::map<int64_t, Segment> segments_;                  // begin -> segment
  std::set<std::pair<int64_t, int64_t>> free_by_size_;  // (bytes, begin) of free segments
  std::unordered_map<AllocationId, int64_t> used_;       // id -> begin
  int64_t live_bytes_ = 0;
  int64_t peak_end_ = 0;
  int64_t peak_live_ = 0;
  int64_t large_bytes_ = 0;
};

}  // namespace mplan

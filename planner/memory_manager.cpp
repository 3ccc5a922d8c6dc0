#include "planner/memory_manager.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace mplan {

MemoryManager::MemoryManager(int64_t capacity_bytes, int64_t alignment_bytes)
    : capacity_(alignment_bytes > 0 ? capacity_bytes / alignment_bytes * alignment_bytes : 0),
      alignment_(alignment_bytes) {
  MPLAN_CHECK(alignment_bytes > 0, "alignment must be positive");
  if (capacity_ > 0) insert_free(0, capacity_);
}

int64_t MemoryManager::reserved_bytes(int64_t size_bytes) const {
  int64_t units = std::max<int64_t>(1, (size_bytes + alignment_ - 1) / alignment_);
  return units * alignment_;
}

int64_t MemoryManager::largest_free_bytes() const {
  return free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first;
}

void MemoryManager::insert_free(int64_t begin, int64_t end) {
  segments_[begin] = Segment{begin, end, kFreeSegment};
  free_by_size_.insert({end - begin, begin});
}

void MemoryManager::erase_free(const Segment& s) {
  free_by_size_.erase({s.bytes(), s.begin});
}

std::optional<int64_t> MemoryManager::allocate(AllocationId id, int64_t size_bytes) {
  int64_t size = reserved_bytes(size_bytes);
  // Best fit: the smallest free segment that holds it, lowest address among equals.
  auto it = free_by_size_.lower_bound({size, INT64_MIN});
  if (it == free_by_size_.end()) return std::nullopt;
  int64_t begin = it->second;
  if (large_bytes_ > 0 && size >= large_bytes_) begin += it->first - size;
  allocate_at(id, size_bytes, begin);
  return begin;
}

void MemoryManager::allocate_at(AllocationId id, int64_t size_bytes, int64_t offset) {
  MPLAN_CHECK(id != kFreeSegment && !live(id), "allocation id is live or invalid: " + std::to_string(id));
  MPLAN_CHECK(offset % alignment_ == 0, "unaligned offset " + std::to_string(offset));
  int64_t size = reserved_bytes(size_bytes);
  auto it = segments_.upper_bound(offset);
  MPLAN_CHECK(it != segments_.begin(), "offset outside the arena");
  --it;
  Segment s = it->second;
  MPLAN_CHECK(s.free() && s.end >= offset + size,
              "range [" + std::to_string(offset) + ", " + std::to_string(offset + size) +
                  ") is not free");
  erase_free(s);
  segments_.erase(it);
  if (s.begin < offset) insert_free(s.begin, offset);
  segments_[offset] = Segment{offset, offset + size, id};
  if (offset + size < s.end) insert_free(offset + size, s.end);
  used_[id] = offset;
  live_bytes_ += size;
  peak_live_ = std::max(peak_live_, live_bytes_);
  peak_end_ = std::max(peak_end_, offset + size);
}

void MemoryManager::free(AllocationId id) {
  auto u = used_.find(id);
  MPLAN_CHECK(u != used_.end(), "free of an allocation that is not live: " + std::to_string(id));
  auto it = segments_.find(u->second);
  int64_t begin = it->second.begin, end = it->second.end;
  live_bytes_ -= end - begin;
  used_.erase(u);
  // Coalesce with the free neighbours (moDNN's list merges adjacent free nodes).
  if (it != segments_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.free()) {
      begin = prev->second.begin;
      erase_free(prev->second);
      segments_.erase(prev);
    }
  }
  auto next = std::next(it);
  if (next != segments_.end() && next->second.free()) {
    end = next->second.end;
    erase_free(next->second);
    segments_.erase(next);
  }
  segments_.erase(it);
  insert_free(begin, end);
}

int64_t MemoryManager::offset_of(AllocationId id) const {
  auto u = used_.find(id);
  MPLAN_CHECK(u != used_.end(), "allocation is not live: " + std::to_string(id));
  return u->second;
}

double MemoryManager::fragmentation() const {
  if (peak_live_ == 0) return 0;
  return static_cast<double>(peak_end_) / static_cast<double>(peak_live_) - 1.0;
}

std::vector<Segment> MemoryManager::segments() const {
  std::vector<Segment> out;
  out.reserve(segments_.size());
  for (const auto& [begin, s] : segments_) out.push_back(s);
  return out;
}

}  // namespace mplan

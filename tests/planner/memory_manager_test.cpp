#include "planner/memory_manager.h"

#include <gtest/gtest.h>

namespace mplan {
namespace {

TEST(MemoryManager, AlignsSizesAndOffsets) {
  MemoryManager mm(/*capacity_bytes=*/4096 + 100, /*alignment_bytes=*/256);
  EXPECT_EQ(mm.capacity_bytes(), 4096);  // rounded down
  EXPECT_EQ(mm.allocate(1, 1), 0);
  EXPECT_EQ(mm.allocate(2, 257), 256);   // 1 byte took a whole unit
  EXPECT_EQ(mm.allocate(3, 0), 768);     // 257 took two units; 0 takes one
  EXPECT_EQ(mm.live_bytes(), 256 + 512 + 256);
}

TEST(MemoryManager, ReusesFreedSpaceBestFit) {
  // Layout: a[0,512) b[512,768) c[768,1792) d[1792,2048) then free [2048,4096).
  MemoryManager mm(4096);
  ASSERT_EQ(mm.allocate(1, 512), 0);
  ASSERT_EQ(mm.allocate(2, 256), 512);
  ASSERT_EQ(mm.allocate(3, 1024), 768);
  ASSERT_EQ(mm.allocate(4, 256), 1792);
  mm.free(1);  // hole of 512 at 0
  mm.free(3);  // hole of 1024 at 768
  // 300 bytes -> 512: the 512 hole is the best fit, not the first 1024 one.
  EXPECT_EQ(mm.allocate(5, 300), 0);
  // 600 -> 768: the 1024 hole (the tail of 2048 is larger).
  EXPECT_EQ(mm.allocate(6, 600), 768);
  EXPECT_EQ(mm.allocate(7, 2048), 2048);
  EXPECT_FALSE(mm.allocate(8, 512).has_value());  // only 256 left in one piece
  EXPECT_EQ(mm.largest_free_bytes(), 256);
}

TEST(MemoryManager, LargeAllocationsStackFromTheTop) {
  // Threshold 1024: small ones from the bottom of their best-fit hole, large
  // ones at its top end, so a small hole never splits the large ones' room.
  MemoryManager mm(8192);
  mm.place_large_at_top(1024);
  EXPECT_EQ(mm.allocate(1, 1024), 8192 - 1024);
  EXPECT_EQ(mm.allocate(2, 256), 0);
  EXPECT_EQ(mm.allocate(3, 2048), 8192 - 3072);
  EXPECT_EQ(mm.allocate(4, 512), 256);
  mm.free(2);  // a 256 hole at 0: the 1000-byte large one still goes to the top of the big hole
  EXPECT_EQ(mm.allocate(5, 1000), 8192 - 3072 - 1024);
  EXPECT_EQ(mm.largest_free_bytes(), 8192 - 4096 - 768);
}

TEST(MemoryManager, CoalescesNeighbours) {
  MemoryManager mm(1024);
  ASSERT_EQ(mm.allocate(1, 256), 0);
  ASSERT_EQ(mm.allocate(2, 256), 256);
  ASSERT_EQ(mm.allocate(3, 256), 512);
  mm.free(1);
  mm.free(3);
  EXPECT_EQ(mm.segment_count(), 3);  // free [0,256), used [256,512), free [512,1024)
  mm.free(2);
  ASSERT_EQ(mm.segment_count(), 1);
  EXPECT_EQ(mm.segments().front(), (Segment{0, 1024, kFreeSegment}));
  EXPECT_EQ(mm.allocate(4, 1024), 0);
}

TEST(MemoryManager, AllocateAtCarvesTheMiddleOfAHole) {
  MemoryManager mm(2048);
  mm.allocate_at(1, 256, 512);
  std::vector<Segment> s = mm.segments();
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0], (Segment{0, 512, kFreeSegment}));
  EXPECT_EQ(s[1], (Segment{512, 768, 1}));
  EXPECT_EQ(s[2], (Segment{768, 2048, kFreeSegment}));
  EXPECT_EQ(mm.offset_of(1), 512);
}

TEST(MemoryManager, ReportsPeakAndFragmentation) {
  MemoryManager mm(4096);
  ASSERT_EQ(mm.allocate(1, 1024), 0);
  ASSERT_EQ(mm.allocate(2, 1024), 1024);
  mm.free(1);
  // 2048 cannot use the 1024 hole at 0, so it goes to [2048, 4096): the peak
  // is 4096 while at most 1024 + 2048 = 3072 bytes were ever live.
  ASSERT_EQ(mm.allocate(3, 2048), 2048);
  EXPECT_EQ(mm.peak_bytes(), 4096);
  EXPECT_EQ(mm.peak_live_bytes(), 3072);
  EXPECT_DOUBLE_EQ(mm.fragmentation(), 4096.0 / 3072.0 - 1.0);
  EXPECT_EQ(mm.free_bytes(), 1024);
}

TEST(MemoryManager, NoFragmentationForAStack) {
  MemoryManager mm(4096);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(mm.allocate(i, 512), 512 * i);
  for (int i = 3; i >= 0; --i) mm.free(i);
  EXPECT_EQ(mm.peak_bytes(), 2048);
  EXPECT_DOUBLE_EQ(mm.fragmentation(), 0.0);
}

}  // namespace
}  // namespace mplan

// The write-through admission window (core/write_admission.h): the rule on
// its own (halved on a deferral, once per cut; doubled when the writer was
// idle; between kMinJobs and the ring). Its use by a cache is in
// test_store_write_through.cpp.
#include <gtest/gtest.h>

#include "core/write_admission.h"

namespace kvc {
namespace {

TEST(WriteAdmission, StartsAtTheRingAndGivesWhatIsLeftOfIt) {
  const WriteAdmission w(256);
  EXPECT_EQ(w.window(), 256u);
  EXPECT_EQ(w.room(0), 256u);
  EXPECT_EQ(w.room(200), 56u);
  EXPECT_EQ(w.room(256), 0u);
  EXPECT_EQ(w.room(300), 0u);
  EXPECT_EQ(w.cuts(), 0u);
}

TEST(WriteAdmission, ADeferralHalvesTheJobsOutOncePerCut) {
  WriteAdmission w(256);
  w.deferred(/*job=*/10, /*out=*/200, /*submitted=*/300);
  EXPECT_EQ(w.window(), 100u);
  EXPECT_EQ(w.cuts(), 1u);
  // Jobs submitted before the cut were answered by it.
  w.deferred(11, 150, 310);
  w.deferred(300, 150, 320);
  EXPECT_EQ(w.window(), 100u);
  EXPECT_EQ(w.cuts(), 1u);
  // A job submitted after it: the window was still too long.
  w.deferred(301, 90, 330);
  EXPECT_EQ(w.window(), 45u);
  EXPECT_EQ(w.cuts(), 2u);
  // Never longer than it was, never below kMinJobs.
  w.deferred(331, 1000, 400);
  EXPECT_EQ(w.window(), 45u);
  w.deferred(401, 3, 410);
  EXPECT_EQ(w.window(), WriteAdmission::kMinJobs);
  EXPECT_EQ(w.room(WriteAdmission::kMinJobs), 0u);
}

TEST(WriteAdmission, AnIdleWriterDoublesItUpToTheRing) {
  WriteAdmission w(100);
  w.deferred(1, 10, 10);
  EXPECT_EQ(w.window(), WriteAdmission::kMinJobs);
  w.writer_idle();
  EXPECT_EQ(w.window(), 16u);
  w.writer_idle();
  w.writer_idle();
  EXPECT_EQ(w.window(), 64u);
  w.writer_idle();
  EXPECT_EQ(w.window(), 100u);
  w.writer_idle();
  EXPECT_EQ(w.window(), 100u);
}

}  // namespace
}  // namespace kvc

// State slots (core/state_slots.h, kvcache/state.h): the managed/local rule
// with n_groups, slot sizes and strides, the free lists (managed shared,
// local own), the copy on fork, the invariant checker catching a slot held
// by a sequence that is not live, and the memory plan's split.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <memory>
#include <string>
#include <vector>

#include "backend/device.h"
#include "base/error.h"
#include "core/cache.h"
#include "core/memory_plan.h"
#include "core/state_slots.h"

namespace kvc {
namespace {

StateResource ssm(uint32_t heads, uint32_t dim, uint32_t d_state, kvc_dtype_t dtype) {
  StateResource r;
  r.kind = KVC_RESOURCE_SSM;
  r.num_heads = heads;
  r.head_dim = dim;
  r.d_state = d_state;
  r.dtype = dtype;
  return r;
}

StateResource conv(uint32_t conv_dim, uint32_t d_conv, kvc_dtype_t dtype) {
  StateResource r;
  r.kind = KVC_RESOURCE_CONV;
  r.conv_dim = conv_dim;
  r.d_conv = d_conv;
  r.dtype = dtype;
  return r;
}

kvc_status_t status_of(const std::function<void()>& f, std::string* message = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (message != nullptr) *message = e.what();
    return e.status();
  }
  return KVC_OK;
}

TEST(StateSlots, NGroupsRule) {
  // Nemotron-H-8B: 128 heads of 64, d_state 128, n_groups 8 -> 10240.
  const auto l = lay_out_resources({ssm(128, 64, 128, KVC_DTYPE_F32),
                                    conv(10240, 4, KVC_DTYPE_BF16), conv(10240 + 128, 4, KVC_DTYPE_BF16),
                                    conv(8192, 4, KVC_DTYPE_BF16), conv(8191, 4, KVC_DTYPE_BF16)});
  ASSERT_EQ(l.size(), 5u);
  EXPECT_TRUE(l[0].managed);
  EXPECT_TRUE(l[1].managed);
  EXPECT_EQ(l[1].n_groups, 8u);
  EXPECT_FALSE(l[2].managed);  // 2 * n_groups * 128 = 2176: n_groups 8.5
  EXPECT_EQ(l[2].reason, KVC_RESOURCE_REASON_N_GROUPS);
  EXPECT_FALSE(l[3].managed);  // n_groups 0 holds, but the shape differs from resource 1
  EXPECT_EQ(l[3].reason, KVC_RESOURCE_REASON_CONV_SHAPE_DIFFERS);
  EXPECT_EQ(l[3].n_groups, 0u);
  EXPECT_EQ(l[4].reason, KVC_RESOURCE_REASON_N_GROUPS);  // below head_dim * num_heads
  EXPECT_EQ(l[0].slot_bytes, 128u * 64 * 128 * 4);
  EXPECT_EQ(l[1].slot_bytes, 10240u * 4 * 2);
  EXPECT_EQ(state_bytes_per_slot(l), l[0].slot_stride + l[1].slot_stride + l[2].slot_stride +
                                         l[3].slot_stride + l[4].slot_stride);
}

TEST(StateSlots, ManagedShareAnIndexLocalHaveTheirOwn) {
  auto device = create_device(KVC_DEVICE_CPU, 0);
  // Resources 0, 1 managed; 2 local (other SSM shape).
  StateSlots slots(*device,
                   lay_out_resources({ssm(2, 4, 8, KVC_DTYPE_F32), conv(16, 4, KVC_DTYPE_F32),
                                      ssm(1, 4, 8, KVC_DTYPE_F32)}),
                   3);
  slots.take(10);
  slots.take(11);
  slots.release(10);
  slots.take(12);  // managed and local both reuse slot 0
  EXPECT_EQ(slots.slot(12, 0), 0u);
  EXPECT_EQ(slots.slot(12, 1), 0u);
  EXPECT_EQ(slots.slot(12, 2), 0u);
  EXPECT_EQ(slots.slot(11, 0), 1u);
  EXPECT_EQ(slots.used(0), 2u);
  EXPECT_EQ(slots.used(2), 2u);
  slots.take(13);
  EXPECT_NE(slots.refusal().find("resource 0 (ssm, managed) has all 3"), std::string::npos);
  std::string message;
  EXPECT_EQ(status_of([&] { slots.slot(99, 0); }, &message), KVC_ERR_NOT_FOUND);
  EXPECT_EQ(message, "sequence 99 holds no state slot");
  // The checker: all live -> fine; a slot held by a dead sequence -> broken.
  slots.check([](uint64_t) { return true; }, 3);
  EXPECT_EQ(status_of([&] { slots.check([](uint64_t id) { return id != 11; }, 3); }, &message),
            KVC_ERR_INTERNAL);
  EXPECT_EQ(message, "state slot invariant broken: slots held by sequence 11, not live");
  EXPECT_EQ(status_of([&] { slots.check([](uint64_t) { return true; }, 4); }, &message),
            KVC_ERR_INTERNAL);
  EXPECT_EQ(message, "state slot invariant broken: 3 sequences hold slots, 4 are live");
}

TEST(StateSlots, TakeCopyCopiesEveryResourceBitForBit) {
  auto device = create_device(KVC_DEVICE_CPU, 0);
  StateResource generic;
  generic.kind = KVC_RESOURCE_GENERIC;
  generic.bytes = 33;
  generic.alignment = 1024;
  StateSlots slots(*device,
                   lay_out_resources({ssm(2, 4, 8, KVC_DTYPE_BF16), conv(17, 3, KVC_DTYPE_F16),
                                      generic}),
                   2);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(slots.base(2)) % 1024, 0u);
  slots.take(1);
  for (uint32_t r = 0; r < 3; ++r) {
    auto* p = static_cast<unsigned char*>(slots.base(r)) + slots.slot(1, r) * slots.layout(r).slot_stride;
    for (uint64_t b = 0; b < slots.layout(r).slot_bytes; ++b) p[b] = static_cast<unsigned char>(b ^ (r * 77));
  }
  slots.take_copy(1, 2, nullptr);
  for (uint32_t r = 0; r < 3; ++r) {
    const ResourceLayout& l = slots.layout(r);
    auto* base = static_cast<unsigned char*>(slots.base(r));
    EXPECT_EQ(std::memcmp(base + slots.slot(1, r) * l.slot_stride,
                          base + slots.slot(2, r) * l.slot_stride, l.slot_bytes),
              0);
  }
}

TEST(StateSlots, CacheRefusesAddAfterItsOwnChecksAndKeepsSlotsExact) {
  CacheConfig cfg;
  cfg.num_layers = 1;
  cfg.kv_heads = {1};
  cfg.head_dim = 8;
  cfg.tokens_per_block = 4;
  cfg.primary_bytes = 1 << 20;
  cfg.resources = {ssm(2, 4, 8, KVC_DTYPE_F32)};
  cfg.max_state_slots = 2;
  Cache cache(cfg);
  EXPECT_TRUE(cache.config().block_reuse);  // reuse goes through state snapshots
  const int32_t tokens[4] = {1, 2, 3, 4};
  uint64_t cached = 0;
  Refusal refusal;
  ASSERT_TRUE(cache.add(1, tokens, 4, {}, nullptr, &cached, &refusal));
  ASSERT_TRUE(cache.add(2, tokens, 4, {}, nullptr, &cached, &refusal));
  EXPECT_FALSE(cache.add(3, tokens, 4, {}, nullptr, &cached, &refusal));
  EXPECT_EQ(refusal.status, KVC_ERR_OUT_OF_BLOCKS);
  EXPECT_NE(refusal.message.find("has all 2 of its slots in use"), std::string::npos);
  std::string message;
  EXPECT_EQ(status_of([&] { cache.add(3, tokens, 0, {}, nullptr, &cached, &refusal); }, &message),
            KVC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(message, "num_tokens must be > 0: a prompt cannot be empty");
  EXPECT_EQ(cache.describe_resource(0).used, 2u);
  cache.remove(1);
  ASSERT_TRUE(cache.add(3, tokens, 4, {}, nullptr, &cached, &refusal));
  cache.check_invariants();
  EXPECT_EQ(cache.stats().num_sequences, 2u);
}

TEST(StateSlots, PlanSplitsTheBudget) {
  CacheConfig cfg;
  cfg.num_layers = 1;
  cfg.kv_heads = {1};
  cfg.head_dim = 8;  // bf16, 16 tokens: 512-byte blocks
  cfg.primary_bytes = 65536;
  cfg.resources = {ssm(1, 1, 64, KVC_DTYPE_F32)};  // 256-byte slots
  const MemoryPlan plan = plan_memory(cfg, group_layers(cfg), 0);
  EXPECT_EQ(plan.state_slots, 127u);  // min(256, (65536 - 512) / 256 / 2)
  EXPECT_EQ(plan.state_bytes, 127u * 256);
  EXPECT_EQ(plan.snapshot_slots, 31u);  // min(127, (65536 - 127 * 256 - 512) / 256 / 4)
  EXPECT_EQ(plan.snapshot_bytes, 31u * 256);
  EXPECT_EQ(plan.budget_bytes, 65536u - 158 * 256);
  EXPECT_EQ(plan.blocks_per_group, (65536u - 158 * 256) / 512);
}

// Random add/fork/remove/extend on a cache with a managed and a local
// resource: after every step the checker (slot ownership included) holds,
// every live sequence's slots are distinct per resource, a refused add or
// fork changed nothing (statistics and slot counts equal), and a forked
// child's state equals its parent's at the fork.
TEST(StateSlots, RandomizedRunKeepsOwnershipExact) {
  CacheConfig cfg;
  cfg.num_layers = 1;
  cfg.kv_heads = {1};
  cfg.head_dim = 8;
  cfg.tokens_per_block = 4;
  cfg.primary_bytes = 1 << 20;
  cfg.resources = {ssm(2, 4, 8, KVC_DTYPE_F32), ssm(1, 4, 8, KVC_DTYPE_F16)};
  cfg.max_state_slots = 5;
  Cache cache(cfg);
  std::mt19937 rng(7);
  std::vector<uint64_t> live;
  uint64_t next = 1;
  auto slot_bytes = [&](uint64_t id, uint32_t r) {
    const ResourceLayout& l = cache.state()->layout(r);
    const uint32_t s = cache.state()->slot(id, r);
    const auto* p = static_cast<const unsigned char*>(cache.state()->base(r)) + s * l.slot_stride;
    return std::vector<unsigned char>(p, p + l.slot_bytes);
  };
  for (int step = 0; step < 800; ++step) {
    const int op = int(rng() % 4);
    const int32_t tokens[3] = {1, 2, 3};
    uint64_t cached = 0;
    Refusal refusal;
    const CacheStats before = cache.stats();
    const size_t live_before = live.size();
    if (op == 0 || live.empty()) {
      const bool ok = cache.add(next, tokens, 1 + rng() % 3, {}, nullptr, &cached, &refusal);
      EXPECT_EQ(ok, live.size() < 5);
      if (ok) {
        live.push_back(next);
        for (uint32_t r = 0; r < 2; ++r) {  // the kernels would write the state
          const ResourceLayout& l = cache.state()->layout(r);
          auto* p = static_cast<unsigned char*>(cache.state()->base(r)) +
                    cache.state()->slot(next, r) * l.slot_stride;
          for (uint64_t b = 0; b < l.slot_bytes; ++b) p[b] = static_cast<unsigned char>(rng());
        }
      } else {
        EXPECT_EQ(refusal.status, KVC_ERR_OUT_OF_BLOCKS);
      }
      ++next;
    } else if (op == 1) {
      const uint64_t parent = live[rng() % live.size()];
      if (live.size() < 5) {
        cache.fork(parent, next);
        live.push_back(next);
        for (uint32_t r = 0; r < 2; ++r) EXPECT_EQ(slot_bytes(parent, r), slot_bytes(next, r));
      } else {
        EXPECT_EQ(status_of([&] { cache.fork(parent, next); }), KVC_ERR_OUT_OF_BLOCKS);
      }
      ++next;
    } else if (op == 2) {
      const size_t k = rng() % live.size();
      cache.remove(live[k]);
      live[k] = live.back();
      live.pop_back();
    } else {
      cache.extend(live[rng() % live.size()], tokens, 1, nullptr, &refusal);
    }
    if (live_before == 5 && op <= 1) {  // a refused add or fork changed nothing
      const CacheStats after = cache.stats();
      EXPECT_EQ(before.num_sequences, after.num_sequences);
      EXPECT_EQ(before.in_use_blocks, after.in_use_blocks);
    }
    cache.check_invariants();
    for (uint32_t r = 0; r < 2; ++r) {
      EXPECT_EQ(cache.describe_resource(r).used, live.size());
      std::map<uint32_t, uint64_t> owner;
      for (uint64_t id : live)
        EXPECT_TRUE(owner.emplace(cache.state()->slot(id, r), id).second) << "slot shared";
    }
  }
}

}  // namespace
}  // namespace kvc

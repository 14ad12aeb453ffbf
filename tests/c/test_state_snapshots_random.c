/* C API of state snapshots (state.h, issue 21 items 4 and 5): a randomized
 * run against a shadow of the published states with the invariant check
 * after every call (state slots, snapshot pool, host tier). Black box: only
 * the public header. */
#include "state_snapshots_fixture.h"

/* Randomized: prompts over a small alphabet (prefixes collide), chunked
 * prefill that publishes the state "of the prefix" (a pattern of its hash,
 * as a model's state is a function of the prefix), decode with rewinds,
 * forks and removals, on a small pool with a host tier; after each call
 * the invariant check, and each reuse must restore the pattern of the
 * reused prefix. */
static uint32_t prefix_seed(const int32_t* tokens, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; ++i) h = (h ^ (uint32_t)tokens[i]) * 16777619u;
  return h;
}

enum { MAXSEQ = 6, MAXTOK = 40 };

/* Publishes, or is refused because the block is not in the tree (a commit
 * leaves a block a fork sibling still shares unpublished). */
static void publish_or_unpublished(kvc_cache_t* cache, uint64_t id, uint64_t position) {
  const kvc_status_t st = kvc_sequence_publish_state(cache, id, position, NULL);
  if (st == KVC_OK) return;
  assert_int_equal(st, KVC_ERR_INVALID_STATE);
  if (strstr(kvc_last_error_message(), "is not published in the prefix tree") == NULL)
    fail_msg("publish: %s", kvc_last_error_message());
}

static void randomized(void** state) {
  (void)state;
  for (uint32_t round = 0; round < 3; ++round) {
    /* Rounds 1 and 2 have a host tier and a small device snapshot pool:
     * 4096 host bytes give 1 host snapshot slot and 24 host blocks, 8192
     * give 2 and 48 (state.h; a slot of every resource is 1024 bytes). */
    kvc_config_t* c = hybrid_config(MAXSEQ * 1024 + 10 * 1024 + 48 * 128, MAXSEQ,
                                    round == 0 ? 10 : 3, round == 2);
    if (round >= 1) ok(kvc_config_set_host_cache_bytes(c, 4096u * (round == 2 ? 2 : 1)));
    kvc_cache_t* cache = create(c);
    srand(1234 + round);
    uint64_t ids[MAXSEQ];
    int32_t toks[MAXSEQ][MAXTOK];
    size_t lens[MAXSEQ];
    size_t live = 0;
    uint64_t next = 1, hits = 0, restores = 0;
    for (int step = 0; step < 600; ++step) {
      const int op = rand() % 6;
      if ((op == 0 || live == 0) && live < MAXSEQ) {
        const size_t n = 2 + (size_t)(rand() % 24);
        int32_t* t = toks[live];
        /* Half the prompts start with one of two "system prompts". */
        const int sys = rand() % 4;
        for (size_t i = 0; i < n; ++i) t[i] = sys < 2 && i < 9 ? sys * 7 + (int32_t)i : rand() % 2;
        uint64_t cached = 0;
        const kvc_status_t st = kvc_sequence_add(cache, next, t, n, NULL, NULL, &cached);
        if (st == KVC_ERR_OUT_OF_BLOCKS) continue;
        ok(st);
        if (cached > 0) {
          assert_true(cached % T == 0);
          assert_true(holds(cache, next, prefix_seed(t, cached)));
          ++hits;
        }
        ids[live] = next++;
        lens[live] = n;
        ++live;
        /* Prefill from cached in chunks of 1..8, publishing where aligned. */
        size_t at = cached;
        while (at < n) {
          size_t end = at + 1 + (size_t)(rand() % 8);
          if (end > n) end = n;
          fill(cache, ids[live - 1], prefix_seed(t, end));
          ok(kvc_sequence_commit(cache, ids[live - 1], end));
          if (end % T == 0 && rand() % 3 != 0) publish_or_unpublished(cache, ids[live - 1], end);
          at = end;
        }
      } else if (op == 1 && live > 0) {
        const size_t k = (size_t)rand() % live;
        ok(kvc_sequence_remove(cache, ids[k]));
        ids[k] = ids[live - 1];
        lens[k] = lens[live - 1];
        memcpy(toks[k], toks[live - 1], sizeof toks[k]);
        --live;
      } else if (op == 2 && live > 0 && live < MAXSEQ) {
        const size_t k = (size_t)rand() % live;
        const kvc_status_t st = kvc_sequence_fork(cache, ids[k], next);
        if (st == KVC_ERR_OUT_OF_BLOCKS) continue;
        ok(st);
        assert_true(holds(cache, next, prefix_seed(toks[k], lens[k])));
        ids[live] = next++;
        lens[live] = lens[k];
        memcpy(toks[live], toks[k], sizeof toks[k]);
        ++live;
      } else if (op == 3 && live > 0) {
        /* Speculative step: publish at the aligned length if any, run
         * 1..3 drafts, then rewind to the snapshot or keep them. */
        const size_t k = (size_t)rand() % live;
        const size_t n = lens[k];
        const size_t drafts = 1 + (size_t)(rand() % 3);
        if (n + drafts > MAXTOK) continue;
        const int aligned = n % T == 0;
        if (aligned) publish_or_unpublished(cache, ids[k], n);
        for (size_t d = 0; d < drafts; ++d) toks[k][n + d] = rand() % 2;
        const kvc_status_t st = kvc_sequence_extend(cache, ids[k], toks[k] + n, drafts, NULL);
        if (st == KVC_ERR_OUT_OF_BLOCKS) continue;
        ok(st);
        fill(cache, ids[k], 0xdead);
        const kvc_status_t rw = kvc_sequence_rewind(cache, ids[k], drafts);
        if (rw == KVC_OK) {
          assert_true(aligned);
          ++restores;
          assert_true(holds(cache, ids[k], prefix_seed(toks[k], n)));
        } else {
          /* No snapshot there; or (windowed) the window's blocks are gone. */
          assert_true(rw == KVC_ERR_INVALID_STATE || rw == KVC_ERR_INVALID_ARGUMENT);
          /* Refused: the drafts stay, with their state. */
          fill(cache, ids[k], prefix_seed(toks[k], n + drafts));
          ok(kvc_sequence_commit(cache, ids[k], n + drafts));
          lens[k] = n + drafts;
        }
      } else if (op == 4 && live > 0) {
        const size_t k = (size_t)rand() % live;
        if (lens[k] >= MAXTOK) continue;
        toks[k][lens[k]] = rand() % 2;
        const kvc_status_t st = kvc_sequence_extend(cache, ids[k], toks[k] + lens[k], 1, NULL);
        if (st == KVC_ERR_OUT_OF_BLOCKS) continue;
        ok(st);
        ++lens[k];
        fill(cache, ids[k], prefix_seed(toks[k], lens[k]));
        ok(kvc_sequence_commit(cache, ids[k], lens[k]));
        if (lens[k] % T == 0 && rand() % 2) publish_or_unpublished(cache, ids[k], lens[k]);
      } else if (op == 5) {
        kvc_cache_stats_t cs = KVC_CACHE_STATS_INIT;
        ok(kvc_cache_get_stats(cache, &cs));
        const kvc_snapshot_stats_t s = stats(cache);
        assert_true(s.slots_used <= s.num_slots);
        assert_true(s.slots_used + s.host_slots_used <= cs.tree_nodes);
        assert_true(s.host_slots_used <= s.host_num_slots);
      }
      ok(kvc_cache_check(cache));
    }
    const kvc_snapshot_stats_t s = stats(cache);
    print_message("round %u: published %llu hits %llu evicted %llu offloaded %llu onboarded %llu "
                  "host_evicted %llu dropped %llu\n", round, (unsigned long long)s.published,
                  (unsigned long long)s.hits, (unsigned long long)s.evicted,
                  (unsigned long long)s.offloaded, (unsigned long long)s.onboarded,
                  (unsigned long long)s.host_evicted, (unsigned long long)s.dropped);
    assert_int_equal(s.hits, hits);
    assert_true(hits > 0);
    assert_int_equal(s.restores, restores);
    assert_true(restores > 0);
    assert_true(s.slots_used + s.host_slots_used + s.evicted + s.host_evicted + s.dropped <=
                s.published);
    assert_true(s.host_slots_used <= s.host_num_slots);
    if (round >= 1) {
      /* The host snapshot pool is reached: offloads and reuses from it. */
      assert_true(s.host_num_slots > 0);
      assert_true(s.offloaded > 0);
      assert_true(s.onboarded > 0);
    } else {
      assert_int_equal(s.host_num_slots, 0);
    }
    kvc_cache_destroy(cache);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(randomized),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

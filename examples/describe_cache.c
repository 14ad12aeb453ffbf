/* Creates a cache for Llama-3.1-8B's shape (32 layers, 8 KV heads, head dim
 * 128, bf16, 16 tokens per block) in 2 GiB and prints its description.
 * Usage: describe_cache [cpu|cuda:N] */
#include <kvcache/kvcache.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                          \
  do {                                                                       \
    kvc_status_t s_ = (call);                                                \
    if (s_ != KVC_OK) {                                                      \
      fprintf(stderr, "%s failed: %s: %s\n", #call, kvc_status_string(s_),   \
              kvc_last_error_message());                                     \
      exit(1);                                                               \
    }                                                                        \
  } while (0)

static const char *dtype_name(kvc_dtype_t d) {
  switch (d) {
    case KVC_DTYPE_F32: return "f32";
    case KVC_DTYPE_F16: return "f16";
    case KVC_DTYPE_BF16: return "bf16";
    case KVC_DTYPE_FP8_E4M3: return "fp8_e4m3";
    default: return "?";
  }
}

int main(int argc, char **argv) {
  kvc_device_kind_t kind = KVC_DEVICE_CPU;
  int32_t ordinal = 0;
  if (argc > 1 && strncmp(argv[1], "cuda:", 5) == 0) {
    kind = KVC_DEVICE_CUDA;
    ordinal = atoi(argv[1] + 5);
  }

  printf("kvcache %s (ABI %u), features: cuda compiled=%s, cuda device=%s\n",
         kvc_version_string(), kvc_abi_version(),
         (kvc_features() & KVC_FEATURE_CUDA_COMPILED) ? "yes" : "no",
         (kvc_features() & KVC_FEATURE_CUDA_DEVICE) ? "yes" : "no");

  kvc_config_t *cfg = NULL;
  CHECK(kvc_config_create(&cfg));
  CHECK(kvc_config_set_num_layers(cfg, 32));
  CHECK(kvc_config_set_kv_heads(cfg, 8));
  CHECK(kvc_config_set_head_dim(cfg, 128));
  CHECK(kvc_config_set_dtype(cfg, KVC_DTYPE_BF16));
  CHECK(kvc_config_set_tokens_per_block(cfg, 16));
  CHECK(kvc_config_set_primary_bytes(cfg, 2ull << 30));
  CHECK(kvc_config_set_device(cfg, kind, ordinal));

  kvc_cache_t *cache = NULL;
  CHECK(kvc_cache_create(cfg, &cache));
  kvc_config_destroy(cfg);

  kvc_cache_desc_t d = KVC_CACHE_DESC_INIT;
  CHECK(kvc_cache_describe(cache, &d));
  printf("Llama-3.1-8B shape on %s%s: %u layers, %s, %s layout, kv_factor %u\n",
         d.device_kind == KVC_DEVICE_CUDA ? "cuda:" : "cpu",
         d.device_kind == KVC_DEVICE_CUDA ? (argv[1] + 5) : "", d.num_layers,
         dtype_name(d.dtype), d.layout == KVC_LAYOUT_NHD ? "NHD" : "HND", d.kv_factor);
  printf("  %u layer group(s), %u pool(s), %llu blocks of %u tokens, %llu tokens capacity\n",
         d.num_groups, d.num_pools, (unsigned long long)d.num_blocks, d.tokens_per_block,
         (unsigned long long)d.token_capacity);
  printf("  primary memory: %llu bytes\n", (unsigned long long)d.primary_bytes);
  for (uint32_t g = 0; g < d.num_groups; ++g) {
    kvc_group_desc_t gd = KVC_GROUP_DESC_INIT;
    CHECK(kvc_cache_describe_group(cache, g, &gd));
    printf("  group %u: %u layers, window %s%u, %u kv heads x %u dims, %llu bytes/block "
           "(%llu bytes/token), pool %u\n",
           g, gd.num_layers, gd.window ? "" : "full/", gd.window, gd.kv_heads, gd.head_dim,
           (unsigned long long)gd.block_bytes, (unsigned long long)gd.bytes_per_token, gd.pool);
  }
  kvc_layer_view_t v = KVC_LAYER_VIEW_INIT;
  CHECK(kvc_cache_layer_view(cache, 1, &v));
  printf("  layer 1 view: block stride %llu, kv stride %llu, token stride %llu, head stride "
         "%llu bytes\n",
         (unsigned long long)v.block_stride, (unsigned long long)v.kv_stride,
         (unsigned long long)v.token_stride, (unsigned long long)v.head_stride);
  kvc_cache_destroy(cache);
  return 0;
}

// open_block_stores (core/block_store.h): the chain of stores a config names.
#include "core/block_store.h"
#include "store/disk_store.h"
#include "store/redis_store.h"

namespace kvc {

std::vector<std::unique_ptr<BlockStore>> open_block_stores(const StoreSettings& settings,
                                                           const RecordLayout& layout) {
  std::vector<std::unique_ptr<BlockStore>> stores;
  if (!settings.disk_dir.empty())
    stores.push_back(std::make_unique<DiskStore>(settings.disk_dir, settings.disk_bytes, layout));
  if (!settings.remote_url.empty()) {
    RedisStoreOptions o;
    o.url = settings.remote_url;
    o.key_namespace = settings.remote_namespace;
    o.capacity_bytes = settings.remote_bytes;
    o.connect_timeout = std::chrono::milliseconds(settings.remote_connect_timeout_ms);
    o.command_timeout = std::chrono::milliseconds(settings.remote_command_timeout_ms);
    o.optional = settings.remote_optional;
    stores.push_back(std::make_unique<RedisStore>(o, layout));
  }
  return stores;
}

}  // namespace kvc

// open_block_stores (core/block_store.h): the chain of stores a config names.
#include "core/block_store.h"
#include "store/disk_store.h"

namespace kvc {

std::vector<std::unique_ptr<BlockStore>> open_block_stores(const StoreSettings& settings,
                                                           const RecordLayout& layout) {
  std::vector<std::unique_ptr<BlockStore>> stores;
  if (!settings.disk_dir.empty())
    stores.push_back(std::make_unique<DiskStore>(settings.disk_dir, settings.disk_bytes, layout));
  return stores;
}

}  // namespace kvc

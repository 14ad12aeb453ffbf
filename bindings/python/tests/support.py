"""Helpers shared by the test modules."""
import kvcache


def small_cache(**settings):
    """A CPU cache: 2 layers, 2 kv heads, head dim 64, 16-token blocks,
    `max_tokens` (default 256, i.e. 16 blocks), bf16."""
    base = dict(num_layers=2, kv_heads=2, head_dim=64, tokens_per_block=16, max_tokens=256,
                dtype="bf16", device="cpu")
    base.update(settings)
    return kvcache.Cache(**base)


def prompt(n, start=0):
    return list(range(start + 1000, start + 1000 + n))


class DLPackOnly:
    """Exposes an array only through DLPack (as a torch CPU tensor does)."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()

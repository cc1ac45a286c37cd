"""dynograph.random: the default generator's seeding and state (torch.random), and fork_rng."""
import contextlib

from ._random import (default_generator, get_rng_state, initial_seed, manual_seed, seed,  # noqa: F401
                      set_rng_state)

__all__ = ["manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state", "fork_rng",
           "default_generator"]


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, device_type="cuda"):
    """Run the block with the default generator's state saved and restored afterwards."""
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)

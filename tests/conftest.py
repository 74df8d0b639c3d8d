import os
import random

import pytest


@pytest.fixture
def seed():
    """A random seed, printed, replayable with ``SPECGEN_SEED=N``."""
    value = int(os.environ["SPECGEN_SEED"]) if os.environ.get("SPECGEN_SEED") else \
        random.SystemRandom().randrange(1 << 31)
    print(f"seed={value} (replay: SPECGEN_SEED={value})")
    return value


def pytest_collection_modifyitems(config, items):
    """Plain ``pytest`` leaves out the ``slow`` set; ``-m slow`` (make test-slow) runs it."""
    if config.option.markexpr:
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]

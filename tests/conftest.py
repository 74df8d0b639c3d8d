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

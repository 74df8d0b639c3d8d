import collections
import os
import random

import pytest

# The suite's benches run for seconds, and a cold Verilator build at -Os takes
# longer than the run: the SSMEngine bench's build took 55 s at -Os and 27 s at
# -O0 (cold, this 2-core machine), its run 7.3 s and 8.8 s. A user's or CI's
# setting wins; `make bench` and `specgen` keep Verilator's -Os.
os.environ.setdefault("SPECGEN_VERILATOR_OPT", "-O0")


@pytest.fixture
def seed():
    """A random seed, printed, replayable with ``SPECGEN_SEED=N``."""
    value = int(os.environ["SPECGEN_SEED"]) if os.environ.get("SPECGEN_SEED") else \
        random.SystemRandom().randrange(1 << 31)
    print(f"seed={value} (replay: SPECGEN_SEED={value})")
    return value


#: Test files of minutes (the RTL engine's generation on the decoder core): collected
#: first, so that under pytest-xdist (``--dist loadfile --no-loadscope-reorder``, the
#: Makefile) one worker starts on them while the other works through the rest, instead
#: of one finishing them alone at the end. The other files follow by test count, most
#: first (xdist's own order, which sorts a 2-test file late).
LONG_FIRST = ("test_rtl_generate.py",)


def pytest_collection_modifyitems(config, items):
    """Plain ``pytest`` leaves out the ``slow`` set; ``-m slow`` (make test-slow) runs it.
    The :data:`LONG_FIRST` files go first, then the files by test count."""
    count = collections.Counter(item.path for item in items)
    items.sort(key=lambda item: (item.path.name not in LONG_FIRST, -count[item.path]))
    if config.option.markexpr:
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]

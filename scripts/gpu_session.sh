#!/usr/bin/env bash
# A GPU lease's measurements in one command (../shared/GPU.md's list, as far as 15 minutes
# go), each stage under its own time limit, logs and tables under OUT, the tables last:
#
#   bash scripts/gpu_session.sh OUT [TRAIN_MINUTES]
#   RESUME=1 bash scripts/gpu_session.sh OUT2 [TRAIN_MINUTES]   # the next call: stage 4 only
#
# 1. scripts/gpu_check.py on configs/tatoeba-gpu.toml: CUDA graphs against eager over
#    GRAPH_STEPS updates (and, with CHECK_STEPS, CHECK_EPOCHS and COMPILE_STEPS, bf16 against
#    fp32, exact resume, cached decoding, the compiled step against eager);
# 2. scripts/step_profile.py --variants on configs/base.toml over the Tatoeba + WMT data: the
#    config as it is against `train.cuda_graphs` over static shapes and the levers together,
#    or the step_profile.py variants BASE_VARIANTS names (one per line); profiles of the
#    config and the fastest variant;
# 3. the same for configs/tatoeba-gpu.toml (GPU_VARIANTS);
# 4. base.toml trained on that data with the fastest variant's settings from 2 (kept in
#    runs/base-tw.sets) until TRAIN_MINUTES of training in all (default 10) or the stage's
#    limit: `timeout` sends SIGTERM, on which training saves last.pt, so a second call
#    with RESUME=1 on the same machine continues it exactly (`train --resume`). Its
#    metrics.tsv (the loss curve and tokens/s an epoch) and log go to OUT. TRAIN_MINUTES 0:
#    no training.
#
# It prepares the data it lacks (reading ../shared/data): a GPU machine, which has neither
# that data nor the internet, needs data/prepared carried, prepared here by a dry run.
# PYTHON picks the interpreter (default python3), DEVICE the device (default cuda; cpu for a
# dry run), CHECK_SECONDS, BASE_SECONDS, GPU_SECONDS and TRAIN_SECONDS the stages' limits.
# The project is imported from this folder.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: $0 OUT [TRAIN_MINUTES]}
MINUTES=${2:-10}
PY=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
BASE_DATA=data/prepared/base-tw
RUN=runs/base-tw
mkdir -p "$OUT" runs

prepare() {  # config, prepared dir, translator prepare arguments…: only if not there yet
    [ -f "$2/spm.zh.model" ] || $PY -m translator prepare -c "$1" "${@:3}" >>"$OUT/prepare.log" 2>&1
}
prepare configs/tatoeba-gpu.toml data/prepared/tatoeba-4k
prepare configs/tatoeba-cpu.toml data/prepared/tatoeba-3k-ph3 # tatoeba-wmt.toml excludes its test split
prepare configs/tatoeba-wmt.toml "$BASE_DATA" --set "data.dir=$BASE_DATA" \
    --set data.src_vocab_size=16000 --set data.tgt_vocab_size=16000

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$OUT/gpu.txt" 2>&1
$PY -c 'import torch; print("torch", torch.__version__)' >>"$OUT/gpu.txt"

profile() {  # seconds, config, step_profile.py --variants arguments…
    local seconds=$1 config=$2 name
    name=$(basename "$config" .toml)
    shift 2
    timeout "$seconds" $PY scripts/step_profile.py -c "$config" --out "$OUT" --device "$DEVICE" \
        --compare-steps 0 --warmup-steps 10 --steps 40 --profile-steps 10 "$@" 2>&1 | tee "$OUT/profile-$name.log"
    [ -f "$OUT/step_profile.md" ] && mv "$OUT/step_profile.md" "$OUT/step_profile-$name.md"
}

if [ -z "${RESUME:-}" ]; then
    timeout "${CHECK_SECONDS:-50}" $PY scripts/gpu_check.py -c configs/tatoeba-gpu.toml \
        --device "$DEVICE" --out runs/gpu-check --compile-steps "${COMPILE_STEPS:-0}" \
        --graph-steps "${GRAPH_STEPS:-50}" \
        --steps "${CHECK_STEPS:-0}" --epochs "${CHECK_EPOCHS:-0}" 2>&1 | tee "$OUT/check.log"
    mapfile -t base_variants <<<"${BASE_VARIANTS:-$'cuda graphs, static shapes\nlevers'}"
    mapfile -t gpu_variants <<<"${GPU_VARIANTS:-levers}"
    profile "${BASE_SECONDS:-160}" configs/base.toml --set "base:data.dir=$BASE_DATA" \
        --variants "${base_variants[@]}"
    profile "${GPU_SECONDS:-80}" configs/tatoeba-gpu.toml --variants "${gpu_variants[@]}"
    : >"$RUN.sets"  # the fastest base variant's settings, at the config's own token budget
    if [ -f "$OUT/best-base.txt" ]; then
        grep -v '^train.max_tokens=' "$OUT/best-base.txt" >"$RUN.sets"
    fi
    start=(--overwrite)
else
    start=(--resume)
fi

train() {  # base.toml on BASE_DATA with RUN.sets, from the start or resumed
    local sets=()
    while read -r line; do sets+=(--set "$line"); done <"$RUN.sets"
    echo "training base.toml to $MINUTES minutes ($*) with: ${sets[*]:-the config as it is}" | tee "$OUT/train.log"
    timeout "${TRAIN_SECONDS:-300}" $PY -m translator train -c configs/base.toml --device "$DEVICE" \
        --set "data.dir=$BASE_DATA" --set "train.run_dir=$RUN" "$@" \
        --max-minutes "$MINUTES" "${sets[@]}" 2>&1 | tr '\r' '\n' | grep -v '^epoch.*it/s\]$' >>"$OUT/train.log"
    cp "$RUN/metrics.tsv" "$OUT/train-metrics.tsv" 2>/dev/null
}
[ "$MINUTES" = 0 ] || train "${start[@]}"

cat "$OUT"/gpu.txt "$OUT"/check.log "$OUT"/step_profile-*.md 2>/dev/null
tail -n 8 "$OUT/train.log" 2>/dev/null
[ ! -f "$OUT/train-metrics.tsv" ] || (column -t "$OUT/train-metrics.tsv" 2>/dev/null || cat "$OUT/train-metrics.tsv") | cut -c 1-200

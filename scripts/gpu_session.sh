#!/usr/bin/env bash
# A GPU lease's measurements in one command (../shared/GPU.md's list, as far as 15 minutes
# go), each stage under its own time limit, logs and tables under OUT, the tables last:
#
#   bash scripts/gpu_session.sh OUT [TRAIN_MINUTES]
#
# 1. scripts/gpu_profile.py on configs/base.toml over the Tatoeba + WMT data: the eager
#    levers side by side (static shapes, attention dropout 0, 4x tokens), profiles of the
#    config and the fastest lever;
# 2. configs/tatoeba-gpu.toml as it is against `train.compile` (one compile with dynamic
#    shapes: over 100 s on an H100 for this 6+6-layer model; the compiled variants over
#    static shapes compile once per shape, too long for a lease: docs/performance.md);
# 3. base.toml trained TRAIN_MINUTES (default 2) on that data with the fastest variant's
#    settings from 1: its metrics.tsv (the loss curve and tokens/s an epoch) and log.
#
# It prepares the data it lacks (reading ../shared/data): a GPU machine, which has neither
# that data nor the internet, needs data/prepared carried, prepared here by a dry run.
# PYTHON picks the interpreter (default python3), DEVICE the device (default cuda; cpu for a
# dry run), BASE_SECONDS, GPU_SECONDS and TRAIN_SECONDS the stages' limits. The project is
# imported from this folder.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: $0 OUT [TRAIN_MINUTES]}
MINUTES=${2:-2}
PY=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
BASE_DATA=data/prepared/base-tw
mkdir -p "$OUT"

prepare() {  # config, prepared dir, translator prepare arguments…: only if not there yet
    [ -f "$2/spm.zh.model" ] || $PY -m translator prepare -c "$1" "${@:3}" >>"$OUT/prepare.log" 2>&1
}
prepare configs/tatoeba-gpu.toml data/prepared/tatoeba-4k
prepare configs/tatoeba-cpu.toml data/prepared/tatoeba-3k # tatoeba-wmt.toml excludes its test split
prepare configs/tatoeba-wmt.toml "$BASE_DATA" --set "data.dir=$BASE_DATA" \
    --set data.src_vocab_size=16000 --set data.tgt_vocab_size=16000

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$OUT/gpu.txt" 2>&1
$PY -c 'import torch; print("torch", torch.__version__)' >>"$OUT/gpu.txt"

profile() {  # seconds, config, gpu_profile arguments…
    local seconds=$1 config=$2 name
    name=$(basename "$config" .toml)
    shift 2
    timeout "$seconds" $PY scripts/gpu_profile.py -c "$config" --out "$OUT" --device "$DEVICE" \
        --compare-steps 0 --warmup 10 --steps 40 --profile-steps 10 "$@" 2>&1 | tee "$OUT/profile-$name.log"
    [ -f "$OUT/gpu_profile.md" ] && mv "$OUT/gpu_profile.md" "$OUT/gpu_profile-$name.md"
}

profile "${BASE_SECONDS:-150}" configs/base.toml --set "base:data.dir=$BASE_DATA" \
    --variants "attention dropout 0" "static shapes" "max_tokens x4"
profile "${GPU_SECONDS:-240}" configs/tatoeba-gpu.toml --variants compile

sets=()  # the fastest base variant's settings, at the config's own token budget
if [ -f "$OUT/best-base.txt" ]; then
    while read -r line; do
        [[ $line == train.max_tokens=* ]] || sets+=(--set "$line")
    done <"$OUT/best-base.txt"
fi
echo "training base.toml for $MINUTES minutes with: ${sets[*]:-the config as it is}" | tee "$OUT/train.log"
timeout "${TRAIN_SECONDS:-170}" $PY -m translator train -c configs/base.toml --device "$DEVICE" \
    --set "data.dir=$BASE_DATA" --set train.run_dir=runs/base-tw --overwrite \
    --max-minutes "$MINUTES" "${sets[@]}" 2>&1 | tr '\r' '\n' | grep -v '^epoch.*it/s\]$' >>"$OUT/train.log"
cp runs/base-tw/metrics.tsv "$OUT/train-metrics.tsv" 2>/dev/null

cat "$OUT"/gpu.txt "$OUT"/gpu_profile-*.md 2>/dev/null
tail -n 8 "$OUT/train.log"
column -t "$OUT/train-metrics.tsv" 2>/dev/null | cut -c 1-200

#!/usr/bin/env bash
# The recipe study on one GPU, several variants at once: a Tatoeba-sized model leaves an
# H100 mostly idle (docs/performance.md#on-a-gpu), so each group below is its own
# scripts/studies/recipes.py process with its own --out under runs/gpu-study, started detached.
#
#   bash scripts/studies/gpu.sh start [MINUTES [GROUP…]]  # prepare the groups' data, start them
#   bash scripts/studies/gpu.sh progress          # the last epoch of each run so far
#   bash scripts/studies/gpu.sh wait              # until every group has finished; the table
#   bash scripts/studies/gpu.sh sweep DATA GROUP…  # beam 5 × length penalty on valid (test beside)
#                                               # over the groups' EMA, else averaged, models
#
# Wall-clock budgets are shared: read epochs and whether the schedule reached its floor
# (metrics.tsv), not minutes. PYTHON picks the interpreter (default: python), THREADS each
# group's OMP_NUM_THREADS (default: 2).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${GPU_STUDY_OUT:-runs/gpu-study}
PY=${PYTHON:-python}
VOCAB_8K="data.src_vocab_size=8000 data.tgt_vocab_size=8000"
ON_GPU="train.device='cuda'"
# The CPU recipe's budgets as update counts, so the GPU can stand in for the 2-core CPU:
# 4,200 updates of 1,024 tokens are 20 minutes there (the lever study's baseline: 4,210),
# 12,000 are 60 minutes with train.ema (about 5% slower). Deeper or wider models get fewer,
# in proportion to their CPU training tokens/s against 3+3 d_model 256 (docs/quality.md).
# These groups were measured when the CPU config had 4k BPE per side, so they say so; the
# 3k ones add VOCAB_3K after it (the last setting of a key wins).
VOCAB_4K="data.src_vocab_size=4000 data.tgt_vocab_size=4000"
VOCAB_3K="data.src_vocab_size=3000 data.tgt_vocab_size=3000"
CPU_SHAPE="$ON_GPU $VOCAB_4K"
CPU20="$CPU_SHAPE train.max_updates=4200"
CPU60="$CPU_SHAPE train.max_updates=12000"
LAYERS_6="model.encoder_layers=6 model.decoder_layers=6"
WIDTH_384="model.d_model=384 model.heads=6 model.ff_dim=1536"
STUDIES=(  # name | base config | overrides for the group | study variant
    "gpu-8k-levers|configs/tatoeba-gpu.toml|$VOCAB_8K|levers"
    "gpu|configs/tatoeba-gpu.toml||baseline"
    "gpu-levers|configs/tatoeba-gpu.toml||levers"
    "gpu-levers-s2|configs/tatoeba-gpu.toml||levers-seed-2"
    "cpu-shape|configs/tatoeba-cpu.toml|$CPU_SHAPE|baseline"
    "cpu-shape-levers|configs/tatoeba-cpu.toml|$CPU_SHAPE|levers"
    "cpu-shape-levers-s2|configs/tatoeba-cpu.toml|$CPU_SHAPE|levers-seed-2"
    "gpu-s2|configs/tatoeba-gpu.toml||seed-2"
    "gpu-ema|configs/tatoeba-gpu.toml||ema-0.999"
    "gpu-plateau-bleu|configs/tatoeba-gpu.toml||plateau-bleu"
    "c20-base|configs/tatoeba-cpu.toml|$CPU20|baseline"
    "c20-seed2|configs/tatoeba-cpu.toml|$CPU20|seed-2"
    "c20-drop2|configs/tatoeba-cpu.toml|$CPU20|dropout-0.2"
    "c20-drop3|configs/tatoeba-cpu.toml|$CPU20|dropout-0.3"
    "c20-v2k|configs/tatoeba-cpu.toml|$CPU20 data.src_vocab_size=2000 data.tgt_vocab_size=2000|baseline"
    "c20-v3k|configs/tatoeba-cpu.toml|$CPU20 $VOCAB_3K|baseline"
    "c20-lr2e3|configs/tatoeba-cpu.toml|$CPU20|lr-2e-3"
    "c20-l4-d2|configs/tatoeba-cpu.toml|$CPU_SHAPE train.max_updates=3400 model.dropout=0.2|layers-4+4"
    "c20-v3k-s2|configs/tatoeba-cpu.toml|$CPU20 $VOCAB_3K|seed-2"
    "c20-lr2e3-s2|configs/tatoeba-cpu.toml|$CPU20 train.seed=2|lr-2e-3"
    "c20-v3k-lr2e3|configs/tatoeba-cpu.toml|$CPU20 $VOCAB_3K|lr-2e-3"
    "c60-levers|configs/tatoeba-cpu.toml|$CPU60|levers"
    "c60-levers-d2|configs/tatoeba-cpu.toml|$CPU60|levers-dropout-0.2"
    "c60-levers-d2-s2|configs/tatoeba-cpu.toml|$CPU60 train.seed=2|levers-dropout-0.2"
    "c60-levers-d2-v3k|configs/tatoeba-cpu.toml|$CPU60 $VOCAB_3K|levers-dropout-0.2"
    "c60-levers-d2-v3k-s2|configs/tatoeba-cpu.toml|$CPU60 $VOCAB_3K train.seed=2|levers-dropout-0.2"
    "c20-levers-d2-v3k|configs/tatoeba-cpu.toml|$ON_GPU train.max_updates=4000 $VOCAB_3K|levers-dropout-0.2"
    "c60-levers-d3|configs/tatoeba-cpu.toml|$CPU60|levers-dropout-0.3"
    "c60-l6-levers-d3|configs/tatoeba-cpu.toml|$CPU_SHAPE train.max_updates=6650 $LAYERS_6|levers-dropout-0.3"
    "c60-w384-levers-d3|configs/tatoeba-cpu.toml|$CPU_SHAPE train.max_updates=6670 $WIDTH_384|levers-dropout-0.3"
    # the hour's config (d_model 320) at its update count in 60 minutes on the Intel 2-core CPU
    "c60-w320|configs/tatoeba-cpu-60.toml|$ON_GPU train.max_updates=11120|baseline"
    "c60-w320-s2|configs/tatoeba-cpu-60.toml|$ON_GPU train.max_updates=11120|seed-2"
)

study() {  # group-line, then recipes.py's own arguments
    IFS='|' read -r name config sets variant <<<"$1"
    shift
    # shellcheck disable=SC2086  # the overrides are separate words
    $PY scripts/studies/recipes.py -c "$config" ${sets:+--set $sets} --only "$variant" --out "$OUT/$name" "$@"
}

case "${1:-}" in
start)
    minutes=${2:-15}
    if [ $# -gt 2 ]; then  # only the groups named
        wanted=" ${*:3} " chosen=()
        for group in "${STUDIES[@]}"; do
            [[ $wanted == *" ${group%%|*} "* ]] && chosen+=("$group")
        done
        STUDIES=("${chosen[@]}")
    fi
    mkdir -p "$OUT"
    for group in "${STUDIES[@]}"; do study "$group" --prepare-only; done
    for group in "${STUDIES[@]}"; do
        name=${group%%|*}
        OMP_NUM_THREADS=${THREADS:-2} setsid nohup bash -c "$(declare -f study); OUT=$OUT PY=$PY; \
            study '$group' --minutes $minutes" >"$OUT/$name.log" 2>&1 </dev/null &
    done
    echo "started ${#STUDIES[@]} groups under $OUT"
    ;;
progress)
    for group in "${STUDIES[@]}"; do
        IFS='|' read -r name _ _ variant <<<"$group"
        metrics="$OUT/$name/$variant/metrics.tsv"
        if [ -f "$metrics" ]; then echo "$name: $(tail -n 1 "$metrics" | tr '\t' ' ')"; fi
    done
    ;;
wait)
    while pgrep -f "scripts/studies/recipes.py.*--out $OUT/" >/dev/null; do sleep 10; done
    study "${STUDIES[0]}" --table | head -n 2
    for group in "${STUDIES[@]}"; do
        [ -f "$OUT/${group%%|*}/results.tsv" ] || continue  # a group not run
        study "$group" --table | tail -n +3 | sed "s/^| /| ${group%%|*}: /"
    done
    ;;
sweep)
    data=$2 checkpoints=()
    for group in "${STUDIES[@]}"; do
        IFS='|' read -r name _ _ variant <<<"$group"
        [[ " ${*:3} " == *" $name "* ]] || continue
        dir="$OUT/$name/$variant/checkpoints"
        if [ -f "$dir/ema.pt" ]; then checkpoints+=("$dir/ema.pt"); else checkpoints+=("$dir/average5.pt"); fi
    done
    $PY scripts/studies/decode_sweep.py --data "$data" "${checkpoints[@]}" --beams 5 \
        --alphas 0.6 1.0 1.5 2.0 --test --device "${DEVICE:-cuda}"
    ;;
*)
    echo "usage: $0 start [MINUTES [GROUP...]] | progress | wait | sweep DATA GROUP..." >&2
    exit 2
    ;;
esac

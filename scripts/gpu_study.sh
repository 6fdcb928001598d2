#!/usr/bin/env bash
# The recipe study on one GPU, several variants at once: a Tatoeba-sized model leaves an
# H100 mostly idle (docs/performance.md#on-a-gpu), so each group below is its own
# scripts/study.py process with its own --out under runs/gpu-study, started detached.
#
#   bash scripts/gpu_study.sh start [MINUTES [GROUP…]]   # prepare the groups' data, start them
#   bash scripts/gpu_study.sh progress          # the last epoch of each run so far
#   bash scripts/gpu_study.sh wait              # until every group has finished; the table
#
# Wall-clock budgets are shared: read epochs and whether the schedule reached its floor
# (metrics.tsv), not minutes. PYTHON picks the interpreter (default: python).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${GPU_STUDY_OUT:-runs/gpu-study}
PY=${PYTHON:-python}
VOCAB_8K="data.src_vocab_size=8000 data.tgt_vocab_size=8000"
ON_GPU="train.device='cuda'"
STUDIES=(  # name | base config | overrides for the group | study variant
    "gpu-8k-levers|configs/tatoeba-gpu.toml|$VOCAB_8K|levers"
    "gpu|configs/tatoeba-gpu.toml||baseline"
    "gpu-levers|configs/tatoeba-gpu.toml||levers"
    "gpu-levers-s2|configs/tatoeba-gpu.toml||levers-seed-2"
    "cpu-shape|configs/tatoeba-cpu.toml|$ON_GPU|baseline"
    "cpu-shape-levers|configs/tatoeba-cpu.toml|$ON_GPU|levers"
    "cpu-shape-levers-s2|configs/tatoeba-cpu.toml|$ON_GPU|levers-seed-2"
    "gpu-s2|configs/tatoeba-gpu.toml||seed-2"
    "gpu-ema|configs/tatoeba-gpu.toml||ema-0.999"
    "gpu-plateau-bleu|configs/tatoeba-gpu.toml||plateau-bleu"
)

study() {  # group-line, then study.py's own arguments
    IFS='|' read -r name config sets variant <<<"$1"
    shift
    # shellcheck disable=SC2086  # the overrides are separate words
    $PY scripts/study.py -c "$config" ${sets:+--set $sets} --only "$variant" --out "$OUT/$name" "$@"
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
        OMP_NUM_THREADS=2 setsid nohup bash -c "$(declare -f study); OUT=$OUT PY=$PY; \
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
    while pgrep -f "scripts/study.py.*--out $OUT/" >/dev/null; do sleep 10; done
    study "${STUDIES[0]}" --table | head -n 2
    for group in "${STUDIES[@]}"; do
        study "$group" --table | tail -n +3 | sed "s/^| /| ${group%%|*}: /"
    done
    ;;
*)
    echo "usage: $0 start [MINUTES [GROUP...]] | progress | wait" >&2
    exit 2
    ;;
esac

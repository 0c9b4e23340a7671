#!/usr/bin/env bash
# One command of a GPU lease (README, "Backends and GPUs"): installs the carried wheels, runs one
# planned `benchmarks/gpu.py` measurement with a GPU monitor beside it, and leaves the figures in
# $OUT. Kept in the repository because a lease copies the tree afresh for every command: a script
# edited on the GPU machine is gone by the next one.
#
#   bash benchmarks/gpu_lease.sh wheels              # here, before the lease: fills .whl/
#   bash benchmarks/gpu_lease.sh MODE [SECONDS]      # on the GPU machine, one mode per command
#   bash benchmarks/gpu_lease.sh --print MODE        # the gpu.py command a mode runs
#
# EXTRA_XLA_FLAGS (unset: none) go before a mode's own XLA flags, e.g. a winning variant's for
# `variants`: EXTRA_XLA_FLAGS=--xla_gpu_force_conv_nhwc=true
#
# Modes (SECONDS: the command's own limit, default 420, at least 180 for the timed ones; give
# the `run` call about 15 s more). Every compile and measurement ends 10 s before it (--end), so
# the report is printed in time. A lease's 15 minutes hold the machine's start, one command of
# 585 s and, at once (the machine goes back after 30 s idle, its caches with it), one of
# $((budget_left_s - 45)) s. The meta step was timed on 2026-12-04 (`meta 585`), SPAct at 4x the
# batch on 2026-12-05 (`largest 585`, then `largest 370`: the second loads the autotuning the
# first cut short). The next lease runs `nhwc 585`, then `nhwc` again with the seconds left
# (the lead for 40 % of the bf16 peak); the one after, `graphs 585` and `graphs` again (the
# lead for the GPU's idle time); later ones `LARGEST_FACTOR=8 ... largest` on an H200, `peer`
# (420 s: the second command of a lease whose first takes at most about 400) and `variants`.
#   meta        the eight-model meta step (its deciding pass and the meta update's program)
#               without XLA's fusion autotuner, under autotuning level 1 (convolutions and
#               matmuls still autotuned, without buffer initialisation or correctness checks):
#               the only way it compiled inside a command (315 s on 2026-12-04; XLA's defaults
#               and the fusion autotuner off alone did not in 465 s). One process compiles and
#               times it, with all the time the matmul leaves; the same mode run again on the
#               same machine loads it from the cache (57 s)
#   variants    SPAct bf16 with XLA's defaults, without the fusion autotuner, NHWC convolution
#               layouts and autotuning level 1, each compiled, timed and profiled (needs about
#               420 s; the traces stay in /tmp, their summaries are in the report)
#   nhwc        SPAct bf16 at twice the paper's batch (the best fraction of the peak so far,
#               36 % on an H200) with meta's flags, plain and with NHWC convolution layouts
#               (the trace's lead: cuDNN's layout conversions around R3D's 3-D convolutions,
#               8 % of the busy time), the two compiled side by side, then each timed, the
#               NHWC one's speedup over the plain one in its row. Run again at once with the
#               seconds left, it loads what the first command compiled or autotuned
#   graphs      as nhwc, with cuDNN's convolutions recorded into XLA's CUDA graphs (command
#               buffers) instead of NHWC layouts: the trace's other lead, the GPU idle 13 % of
#               the step between kernels. By default XLA's graphs hold the fused kernels, not
#               the convolutions, so the host launches every convolution on its own between
#               two graphs (docs/gpu.md). With EXTRA_XLA_FLAGS=$NHWC where nhwc found NHWC
#               faster
#   peer        SPAct bf16 at the paper's batch beside the authors' PyTorch step, as they wrote it
#               and without the gradients it discards (--detach), float32 and bf16 autocast,
#               cuDNN's algorithm search on: the ratio the 2026-11-26 run (5.0x) overstated
#               (docs/gpu.md, "The PyTorch peer"); meta's flags for a compile inside the command
#   largest     SPAct bf16 at LARGEST_FACTOR (default 4) times the paper's batch (24 clips
#               and 64 image pairs times it), compiled alone, then timed, with meta's flags (level 1,
#               no fusion autotuner). 1x and 2x are measured on an H200 (2026-11-28, 2026-12-04),
#               4x on an H100 (2026-12-05: 58.7 GiB; its compile took this mode twice, 435 s
#               then 184 s); 1x, 2x and 4x compiled side by side did not finish in 435 s, nor 4x
#               with XLA's defaults in 280 s. LARGEST_FACTOR=8 (about 117 GiB) fits only an H200
#   meta_start  the eight-model meta step with XLA's default autotuning, started in its own
#               session so that it outlives this command (its compile takes longer than one)
#   meta_wait   waits for meta_start's report (same machine, a later command)
#   learning    the learning check on gpu_check/ (exported on a CPU, carried), float32
#   learning_highest  the same with JAX_DEFAULT_MATMUL_PRECISION=highest (no TF32)
set -euo pipefail
SCRIPT=$(realpath "$0")
cd "$(dirname "$SCRIPT")/.."

WHEELS=(keras==3.15.1 optree==0.20.0 namex==0.1.0)
# XLA's fusion autotuner (on by default since jaxlib 0.9) compiles fusions with both its native
# and its Triton emitters to time them: reported to take tens of minutes on large programs.
# Level 0 turns it off with every other autotuning; this flag turns it off alone.
FUSION_AUTOTUNER_OFF="--xla_gpu_experimental_enable_fusion_autotuner=false"
NHWC="--xla_gpu_force_conv_nhwc=true"
# Adds cuDNN convolutions to the kinds XLA records into its command buffers (CUDA graphs); the
# '+' keeps the default kinds (fusions, cuBLAS, cuBLASLt, custom calls, cuDNN fusions).
CONV_GRAPHS="--xla_gpu_enable_command_buffer=+CONVOLUTION"
# XLA's levels: 0 off, 1 on, 2 +init, 3 +reinit, 4 +check (the default: each candidate kernel's
# output is also checked against a reference, on freshly initialised buffers).
LEVEL1="--xla_gpu_autotune_level=1"
OUT=${OUT:-gpu_out}
LARGEST_FACTOR=${LARGEST_FACTOR:-4}  # largest: the multiple of the paper's batch
WHEEL_DIR=${WHEEL_DIR:-.whl}
META_LOG=/tmp/gpu_lease_meta.jsonl
# A mode's compilation cache, kept on the machine between the commands of a lease: the same
# mode run again loads the steps it compiled, and the autotuning results of a compile that its
# limit cut short. One folder a mode, so that no mode loads another's autotuning results.
CACHE=/tmp/gpu_lease_cache

usage() {
    sed -n '2,/^set -euo/p' "$SCRIPT" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# The gpu.py arguments of a mode, given the command's limit in seconds.
gpu_args() {
    local mode=$1 limit=$2
    local common="--steps 5 --no_torch --cache $CACHE/$mode"
    case $mode in
        variants)  # traces under /tmp: $OUT brings back few files, none deep
            echo "--jobs spact:mixed_bfloat16 --compile_first 4 $common --largest_batch 0" \
                "--profile /tmp/gpu_lease_profile --timeout $((limit - 120))" \
                "--deadline $((limit - 60)) --end $((limit - 10))" ;;
        meta)  # one process compiles and times: no compile of its own ahead of the timing
            echo "--jobs meta:mixed_bfloat16 $common --largest_batch 0" \
                "--timeout $((limit - 10)) --deadline $((limit - 120)) --end $((limit - 10))" ;;
        meta_start)  # outlives the command: its compile and run may take 14 minutes
            echo "--jobs meta:mixed_bfloat16 $common --largest_batch 0 --timeout 840" ;;
        nhwc | graphs)  # twice the paper's batch, plain and the variant: two compiles side by side
            echo "--jobs spact:mixed_bfloat16 --clips 48 --images 128 --compile_first 2" \
                "$common --largest_batch 0" \
                "--timeout $((limit - 150)) --deadline $((limit - 60)) --end $((limit - 10))" ;;
        peer)  # the PyTorch peer runs only without --no_torch; its four runs are short
            echo "--jobs spact:mixed_bfloat16 --steps 5 --cache $CACHE/$mode --largest_batch 0" \
                "--timeout $((limit - 10)) --deadline $((limit - 60)) --end $((limit - 10))" ;;
        largest)  # one batch, compiled alone: the paper's, LARGEST_FACTOR times
            echo "--jobs spact:mixed_bfloat16 --clips $((24 * LARGEST_FACTOR))" \
                "--images $((64 * LARGEST_FACTOR))" \
                "--compile_first 1 $common --largest_batch 0" \
                "--timeout $((limit - 150)) --deadline $((limit - 60)) --end $((limit - 10))" ;;
        learning | learning_highest)
            echo "--learning_check gpu_check" ;;
        *) return 1 ;;
    esac
}

# The XLA_FLAGS a mode adds, and its --variant_flags (separated by '|').
mode_flags() {
    case $1 in
        variants) echo "|$FUSION_AUTOTUNER_OFF;$NHWC;$LEVEL1" ;;  # the one meta hinges on first
        meta | largest | peer) echo "$LEVEL1 $FUSION_AUTOTUNER_OFF|" ;;
        nhwc) echo "$LEVEL1 $FUSION_AUTOTUNER_OFF|$NHWC" ;;
        graphs) echo "$LEVEL1 $FUSION_AUTOTUNER_OFF|$CONV_GRAPHS" ;;
        *) echo "|" ;;
    esac
}

gpu_command() {
    local mode=$1 limit=$2 flags args
    args=$(gpu_args "$mode" "$limit") || { echo "unknown mode: $mode" >&2; usage; }
    flags=$(mode_flags "$mode")
    local own=${flags%%|*} variants=${flags#*|}
    local xla="${EXTRA_XLA_FLAGS:-}${EXTRA_XLA_FLAGS:+${own:+ }}$own"
    local precision=""
    [[ $mode == learning_highest ]] && precision="JAX_DEFAULT_MATMUL_PRECISION=highest "
    printf '%sXLA_FLAGS="%s" KERAS_BACKEND=jax python benchmarks/gpu.py %s' \
        "$precision" "$xla" "$args"
    [[ -n $variants ]] && printf ' --variant_flags="%s"' "$variants"
    echo
}

# GPU memory and load every 10 s, as the docs/gpu_*.jsonl lines: seconds, load average (1 min),
# GPU memory used (MiB), GPU utilisation (%).
monitor() {
    local start=$SECONDS
    while sleep 10; do
        local gpu load
        gpu=$(nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader,nounits \
            2> /dev/null | head -n 1 | tr -d ' ') || gpu="null,null"
        load=$(cut -d' ' -f1 /proc/loadavg)
        echo "{\"monitor\": [$((SECONDS - start)), $load, ${gpu%,*}, ${gpu#*,}]}"
    done
}

install_wheels() {
    local missing=()
    for wheel in "${WHEELS[@]}"; do
        compgen -G "$WHEEL_DIR/${wheel%%==*}-${wheel##*==}-*.whl" > /dev/null || missing+=("$wheel")
    done
    if ((${#missing[@]})); then
        echo "missing wheels in $WHEEL_DIR: ${missing[*]}" \
            "(run 'bash $SCRIPT wheels' here, carry it)" >&2
        exit 1
    fi
    pip install -q --no-index --no-deps --target /tmp/site "$WHEEL_DIR"/*.whl
    export PYTHONPATH=/tmp/site:$PWD
}

[[ $# -ge 1 ]] || usage
named_mode=$1
[[ $1 == --print ]] && named_mode=${2:-}
if [[ $named_mode == largest ]] && ! [[ $LARGEST_FACTOR =~ ^[1-9][0-9]*$ ]]; then
    echo "LARGEST_FACTOR must be a positive whole number, got '$LARGEST_FACTOR'" >&2
    exit 2
fi
if [[ $1 == --print ]]; then
    [[ $# -ge 2 ]] || usage
    if [[ $2 == meta_wait ]]; then
        echo "meta_wait runs no gpu.py: it waits for meta_start's, which --print meta_start shows"
        exit 0
    fi
    gpu_command "$2" "${3:-420}"
    exit 0
fi
mode=$1 limit=${2:-420}
if [[ $mode =~ ^(meta|variants|nhwc|graphs|largest|peer)$ ]] && ((limit < 180)); then
    echo "$mode needs a limit of at least 180 s, got $limit" >&2
    exit 2
fi
if [[ $mode == _meta_background ]]; then
    install_wheels
    monitor > "${META_LOG%.jsonl}_monitor.jsonl" &
    monitor_pid=$!
    bash -c "$(gpu_command meta_start "$limit")" > "$META_LOG" 2>&1
    kill $monitor_pid
    exit 0
fi
if [[ $mode == wheels ]]; then
    # The GPU machine's Python and platform, whatever this machine's: optree's is a binary wheel.
    pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$WHEEL_DIR" \
        "${WHEELS[@]}"
    ls "$WHEEL_DIR"
    exit 0
fi

mkdir -p "$OUT"
if [[ $mode == meta_wait ]]; then
    [[ -f $META_LOG ]] || { echo "no $META_LOG: run meta_start on this machine first" >&2; exit 1; }
    deadline=$((SECONDS + limit - 10))
    until grep -q '"seconds"' "$META_LOG" || ((SECONDS > deadline)); do sleep 5; done
    cp "$META_LOG" "${META_LOG%.jsonl}_monitor.jsonl" "$OUT/" 2> /dev/null || true
    cat "$META_LOG"
    exit 0
fi

command=$(gpu_command "$mode" "$limit")
install_wheels
echo "{\"note\": \"$(date -u +%FT%TZ) $mode: ${command//\"/\\\"}\"}" | tee "$OUT/gpu_$mode.jsonl"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2> /dev/null \
    | sed 's/.*/{"note": "&"}/' | tee -a "$OUT/gpu_$mode.jsonl" || true
if [[ $mode == meta_start ]]; then
    # Its own session: it runs on after this command ends, until the machine goes back.
    setsid nohup bash "$SCRIPT" _meta_background "$limit" < /dev/null > /dev/null 2>&1 &
    sleep $((limit - 10))
    cp "$META_LOG" "${META_LOG%.jsonl}_monitor.jsonl" "$OUT/" 2> /dev/null || true
    tail -n 20 "$META_LOG"
    exit 0
fi
monitor > "$OUT/monitor_$mode.jsonl" &
monitor_pid=$!
trap 'kill $monitor_pid 2> /dev/null || true' EXIT
bash -c "$command" 2>&1 | tee -a "$OUT/gpu_$mode.jsonl"

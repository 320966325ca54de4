#!/usr/bin/env bash
# GPU smoke test of `agentgym train --backend verl`: 2 GRPO steps of the tiny model on BabyAI, FSDP2
# actor and vLLM rollout sharing one NVIDIA GPU, then each step's time and throughput.
#
# From a clean checkout, on a machine with one NVIDIA GPU, Python >= 3.11 and network access to PyPI:
#   bash scripts/gpu_smoke.sh
# Environment (all optional):
#   VENV=runs/.gpu-smoke-venv the virtual environment to create (reused, and our packages
#                             reinstalled, when it already exists)
#   OUT_DIR=runs              runs_dir of the run (the run is $OUT_DIR/gpu_smoke, the log
#                             $OUT_DIR/gpu_smoke.log); runs/ is git-ignored
#   SMOKE_TIMEOUT=900         seconds the training may take before it is stopped
#   VLLM_SPEC=vllm==0.24.0    the vLLM to install
# The install takes minutes the first time (torch + vLLM: several GB); the training should take
# a few minutes (Ray, vLLM and the FSDP workers start; the tiny model builds in ~10 s).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${VENV:-$ROOT/runs/.gpu-smoke-venv}"
OUT_DIR="${OUT_DIR:-$ROOT/runs}"
SMOKE_TIMEOUT="${SMOKE_TIMEOUT:-900}"
# vLLM: verl 0.9.1's own `verl[vllm]` extra pins vllm 0.24.0 (with torch 2.11.0 and transformers
# 5.9.0). An unpinned `vllm` resolves to a newer release that wants a newer transformers than verl
# 0.9.1 allows (< 5.11), so pip would backtrack for a long time or fail.
VLLM_SPEC="${VLLM_SPEC:-vllm==0.24.0}"
LOG="$OUT_DIR/gpu_smoke.log"
T0=$(date +%s)

command -v nvidia-smi >/dev/null || { echo "gpu_smoke: nvidia-smi not found: this needs an NVIDIA GPU" >&2; exit 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || { echo "gpu_smoke: python3 is $(python3 -V 2>&1); agentgym needs >= 3.11" >&2; exit 1; }

# -- install -----------------------------------------------------------------------------------
fresh=1
[ -x "$VENV/bin/python" ] && fresh=0
[ "$fresh" = 1 ] && mkdir -p "$(dirname "$VENV")" && python3 -m venv "$VENV"
PY="$VENV/bin/python"
"$PY" -m pip install --quiet --upgrade pip
# torch is not named here: pip takes the version vLLM pins, from PyPI, whose Linux x86_64 torch
# wheels are CUDA builds (the NVIDIA driver must support that CUDA version). Do not preinstall a
# CPU torch in this venv, and unset PIP_FIND_LINKS if it points at CPU torch wheels.
# verl's packages are also pinned explicitly: the versions hatch.toml's verl environment tests
# (agentgym-train's [verl] extra allows any TransferQueue >= 0.1.10).
"$PY" -m pip install \
    packages/agentgym-core packages/agentgym-env-babyai "packages/agentgym-train[verl]" \
    "verl==0.9.1" "TransferQueue==0.1.11" "cachetools>=5" fastapi uvicorn pyarrow \
    "$VLLM_SPEC" "transformers==5.9.0"
if [ "$fresh" = 0 ]; then
    # an existing venv: take the checkout's current code
    "$PY" -m pip install --quiet --no-deps --force-reinstall \
        packages/agentgym-core packages/agentgym-env-babyai packages/agentgym-train
fi
"$PY" - <<'PY'
import torch, verl, vllm, transformers
assert torch.cuda.is_available(), "torch sees no GPU (a CPU build of torch?)"
print(f"torch {torch.__version__} (CUDA {torch.version.cuda}), vllm {vllm.__version__}, "
      f"verl {verl.__version__}, transformers {transformers.__version__}, GPU {torch.cuda.get_device_name(0)}")
PY
T1=$(date +%s)

# -- train -------------------------------------------------------------------------------------
# Without the flash-attn package, --backend verl uses sdpa attention without padding removal.
mkdir -p "$OUT_DIR"
set +e
# resume=false: a rerun trains its 2 steps again instead of resuming past them
timeout "$SMOKE_TIMEOUT" "$VENV/bin/agentgym" train --backend verl --device cuda \
    name=gpu_smoke runs_dir="$OUT_DIR" resume=false steps=2 tasks_per_step=4 n=4 envs=babyai \
    train_limit=64 val_limit=4 val_n=1 max_context=2048 horizon=scaling_inter \
    "horizon_params={rounds: [2, 3], every: 1}" \
    "verl={actor_rollout_ref: {rollout: {name: vllm, gpu_memory_utilization: 0.3}}, trainer: {logger: [console]}}" \
    2>&1 | tee "$LOG"
rc=${PIPESTATUS[0]}
set -e
T2=$(date +%s)

# -- report ------------------------------------------------------------------------------------
# verl's console logger prints `step:N - key:value - key:value ...` (behind Ray's
# "(TaskRunner pid=...)" prefix when it runs in a Ray actor); values may read np.float64(1.5).
"$PY" - "$LOG" <<'PY'
import re, sys

steps = {}
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"\bstep:(\d+) - (.*)$", line.rstrip())
    if not m:
        continue
    pairs = {}
    for item in m.group(2).split(" - "):
        key, sep, value = item.rpartition(":")
        if not sep:
            continue
        wrapped = re.fullmatch(r"[\w.]+\((.*)\)", value.strip())  # np.float64(1.5) -> 1.5
        try:
            pairs[key.strip()] = float(wrapped.group(1) if wrapped else value)
        except ValueError:
            continue
    steps.setdefault(int(m.group(1)), {}).update(pairs)
rows = [(s, kv) for s, kv in sorted(steps.items()) if "timing_s/step" in kv or "perf/throughput" in kv]
if not rows:
    print("gpu_smoke: no `step:` line with timing_s/step or perf/throughput in the log")
for s, kv in rows:
    t, thr = kv.get("timing_s/step"), kv.get("perf/throughput")
    print(f"step {s}: timing_s/step {t if t is None else f'{t:.2f}'}  "
          f"perf/throughput {thr if thr is None else f'{thr:.1f}'} tokens/s/GPU")
PY
echo "install $((T1 - T0)) s, train $((T2 - T1)) s, total wall time $((T2 - T0)) s; log: $LOG"
if [ "$rc" != 0 ]; then
    echo "gpu_smoke: FAILED: agentgym train exited with status $rc$([ "$rc" = 124 ] && echo " (timed out after ${SMOKE_TIMEOUT} s)")" >&2
    echo "gpu_smoke: a local Ray may still be up: $VENV/bin/ray stop" >&2
    exit "$rc"
fi
echo "gpu_smoke: OK"

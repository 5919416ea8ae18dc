#!/usr/bin/env bash
# Several GPUs, on the 2-GPU machine (nvidia-h200-x2; about 5-7 minutes, budget-guarded < 8):
#
#   OUT=/some/dir bash tests/gpu/multi_gpu.sh
#
# 1. the existing two-GPU tests: tests/test_bad_input.py::test_arrays_on_another_gpu (34 ops;
#    they carry a skipif "needs two CUDA GPUs", no marker of their own);
# 2. tests/test_multi_gpu.py: device placement on GPU 1 (no context on GPU 0) and the
#    torchrun smoke test of examples/ddp_train.py (2 ranks, 2 steps, the all-gathered
#    one-epoch disjointness check) for the Scheduler and the DALI loader;
# 3. scaling of the input pipelines alone (--model none), torchrun --nproc_per_node 1 vs 2 (and 4
#    on a machine with four GPUs),
#    batch 256 per rank, 224x224 float32 NCHW out: the Scheduler over an in-memory uint8
#    array (pin_source, Compose RandomResizedCrop + flip + Normalize), the Scheduler over the
#    synthetic JPEG folder of the end-to-end issue (4,096 JPEGs, 500x375 / 375x500, 8 classes;
#    GPU decode when ImageFiles has decode="gpu", else CPU decode), and
#    gpuaug.dali.torch_loader over the same folder. Images/s summed over ranks, scaling
#    efficiency = images/s on 2 GPUs / (2 x images/s on 1 GPU).
#
# Writes to $OUT: multi_gpu_summary.txt (the summary printed at the end), bad_input_2gpu.txt,
# test_multi_gpu.txt, scale-<config>-<n>.json / .txt (each torchrun's RESULT and log).
# Knobs (environment): STEPS=20 WARMUP=5 BATCH=256 N_FOLDER=4096 BUDGET_S=400 (stages that
# would start after BUDGET_S seconds are skipped and listed as such); TESTS=0 or SCALING=0
# leaves out parts 1-2 or part 3.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
mkdir -p "$OUT"
export OUT
source tests/gpu/setup.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
# torchrun sets OMP_NUM_THREADS=1 for nproc > 1 only: the same for every run keeps 1 vs 2 fair
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}
STEPS=${STEPS:-20}; WARMUP=${WARMUP:-5}; BATCH=${BATCH:-256}; N_FOLDER=${N_FOLDER:-4096}
export BATCH
BUDGET_S=${BUDGET_S:-400}
TESTS=${TESTS:-1}; SCALING=${SCALING:-1}
SUMMARY="$OUT/multi_gpu_summary.txt"
: > "$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
nvidia-smi -L
NGPU=$(nvidia-smi -L | grep -c '^GPU')
note "GPUs: $NGPU; NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST=$TORCH_SYMM_MEM_DISABLE_MULTICAST"
[ "$NGPU" -ge 2 ] || note "WARNING: fewer than 2 GPUs: the two-GPU tests skip and nproc 2 runs fail"

# the end-to-end issue's synthetic folder, written in the background while the tests run
FOLDER=/tmp/gpuaug-e2e-folder-$N_FOLDER
( [ -f "$FOLDER/.complete" ] || python3 tests/gpu/write_folder.py "$FOLDER" "$N_FOLDER" ) > "$OUT/folder.txt" 2>&1 &
FOLDER_PID=$!

budget() {  # budget NAME: true if there is time left to start stage NAME
  if [ "$SECONDS" -ge "$BUDGET_S" ]; then note "SKIPPED (time budget, ${SECONDS}s elapsed): $1"; return 1; fi
}

# ---- 1. the existing two-GPU tests --------------------------------------------------------
if [ "$TESTS" = 1 ] && budget "two-GPU tests of test_bad_input"; then
  timeout 170 python3 -m pytest -q -p no:cacheprovider tests/test_bad_input.py -k arrays_on_another_gpu \
    > "$OUT/bad_input_2gpu.txt" 2>&1
  note "two-GPU tests (test_bad_input.py -k arrays_on_another_gpu, rc $?): $(tail -1 "$OUT/bad_input_2gpu.txt")"
fi

# ---- 2. placement + torchrun smoke --------------------------------------------------------
if [ "$TESTS" = 1 ] && budget "tests/test_multi_gpu.py"; then
  timeout 240 python3 -m pytest -v -s -rA -p no:cacheprovider tests/test_multi_gpu.py > "$OUT/test_multi_gpu.txt" 2>&1
  rc=$?
  note "tests/test_multi_gpu.py (rc $rc): $(tail -1 "$OUT/test_multi_gpu.txt")"
  grep -E "^(PASSED|FAILED|XFAIL|XPASS|SKIPPED|ERROR) " "$OUT/test_multi_gpu.txt" | cut -c1-220 | sed 's/^/    /' \
    | tee -a "$SUMMARY"
  # the stage at which a context on GPU 0 appeared (if any), from the probes' JSON
  python3 tests/gpu/multi_gpu_placement.py "$OUT/test_multi_gpu.txt" | tee -a "$SUMMARY"
fi

# ---- 3. scaling ---------------------------------------------------------------------------
wait "$FOLDER_PID"; cat "$OUT/folder.txt"
run() {  # run CONFIG NPROC ARGS...: one torchrun, RESULT json to $OUT/scale-CONFIG-NPROC.json
  local cfg=$1 np=$2; shift 2
  budget "scaling $cfg on $np GPU(s)" || return 0
  [ "$SCALING" = 1 ] || return 0
  timeout 90 python3 -m torch.distributed.run --standalone --nproc_per_node="$np" examples/ddp_train.py \
    --model none --steps "$STEPS" --warmup "$WARMUP" --batch "$BATCH" --size 224 \
    --json "$OUT/scale-$cfg-$np.json" "$@" > "$OUT/scale-$cfg-$np.txt" 2>&1
  local rc=$?
  echo "== $cfg, $np GPU(s), rc $rc"; grep -E "^\[rank|^TOTAL|^CHECK|loader:" "$OUT/scale-$cfg-$np.txt"
  [ $rc -eq 0 ] || { note "scaling $cfg on $np GPU(s) FAILED (rc $rc; log $OUT/scale-$cfg-$np.txt):"
    grep -vE '^\s*$|^\s+File |^\s+\^|^\s{4}|^Traceback|^  (time|host|rank|exitcode|error_file|traceback) |^[=-]+$|Failures:|NO_OTHER|Root Cause|^\[[0-9]+\]:|ChildFailedError|FAILED$|elastic' \
      "$OUT/scale-$cfg-$np.txt" | tail -8 | sed 's/^/    /' | tee -a "$SUMMARY"; }
}
NPS="1 2"; [ "$NGPU" -ge 4 ] && NPS="1 2 4"
for np in $NPS; do run sched-folder "$np" --loader scheduler --folder "$FOLDER" --decode auto; done
for np in $NPS; do run dali-folder "$np" --loader dali --folder "$FOLDER"; done
for np in $NPS; do run sched-memory "$np" --loader scheduler --synthetic 4096 --load-size 256; done

python3 tests/gpu/multi_gpu_scaling.py | tee -a "$SUMMARY"
echo
echo "================ SUMMARY ($SECONDS s) ================"
cat "$SUMMARY"

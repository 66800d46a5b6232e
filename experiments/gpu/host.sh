#!/usr/bin/env bash
# `make gpu-check` on an offline GPU host, from a copy of this repository and the folders that
# `make gpu-carry` wrote (experiments/gpu/carry.py): unpack them, run `experiments.gpu.check` with
# the given arguments into .gpu/out (later runs on the same host add their stages to the same
# record), and copy the record, its figures, the used-by rows, the lossless rows (one tarball) and
# the log to $OUT when it is set.
#
#   GPU_CHECK_SECONDS=300 bash experiments/gpu/host.sh --stages tests,usedby,timing --tokenizer .gpu/tokenizer
#   GPU_CHECK_SECONDS=480 bash experiments/gpu/host.sh --stages lossless
#   GPU_CHECK_SECONDS=540 bash experiments/gpu/host.sh --stages sidebyside --side-dtypes bfloat16
#
# GPU_CHECK_SECONDS stops the check after that many seconds; every stage (every timed shape) is
# saved as it finishes, so a run cut short keeps what it measured.
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
mkdir -p .gpu/out
$PY -m experiments.gpu.carry unpack 2>&1 | tee -a .gpu/out/gpu_host.log
[ "${PIPESTATUS[0]}" = 0 ] || exit 1
export PYTHONPATH=$PWD/.gpu/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
export GOOSE_GGUF_DIR=$PWD/.gpu/model PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
DATA=.gpu/data
[ -d "$DATA" ] || DATA=../shared/data
LIMIT=()
[ -n "${GPU_CHECK_SECONDS:-}" ] && LIMIT=(timeout -k 10 "$GPU_CHECK_SECONDS")
"${LIMIT[@]}" $PY -m experiments.gpu.check --out .gpu/out --work .gpu/work --data-dir "$DATA" "$@" 2>&1 \
  | tee -a .gpu/out/gpu_host.log
rc=${PIPESTATUS[0]}
if [ -n "${OUT:-}" ]; then
  for f in gpu_check.json cost_curve.png projection.md usedby_mtbench.jsonl gpu_host.log; do
    [ -f ".gpu/out/$f" ] && cp ".gpu/out/$f" "$OUT/"
  done
  [ -d .gpu/work/lossless ] && tar -czf "$OUT/lossless_rows.tar.gz" -C .gpu/work lossless
  [ -d .gpu/work/sidebyside ] && tar -czf "$OUT/sidebyside_rows.tar.gz" --exclude "*.lock" --exclude "*.state" \
    -C .gpu/work sidebyside
fi
exit "$rc"

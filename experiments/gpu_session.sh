#!/usr/bin/env bash
# One `device` call of a session lent a GPU: unpack what `make gpu-carry` prepared (wheels, data,
# SmolLM2's GGUF in pieces: experiments/gpu_carry.py), run `experiments.gpu_check` with the
# given arguments into .gpu/out (kept on the warm machine, so later calls add their stages to the
# same record), and copy the record, its figures and the log to $OUT.
#
#   call K carries [".gpu/partK"] (make gpu-carry says how many), e.g. with two parts:
#   call 1, carry [".gpu/part1"]:  bash experiments/gpu_session.sh --stages tests,timing --shapes vicuna-7b
#   call 2, carry [".gpu/part2"]:  bash experiments/gpu_session.sh --stages lossless
#   call 3:                        bash experiments/gpu_session.sh --stages timing --shapes llama3-8b
#   call 4:                        bash experiments/gpu_session.sh --stages timing,projection,figures --shapes qwen3-8b
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
mkdir -p .gpu/out
$PY -m experiments.gpu_carry unpack 2>&1 | tee -a .gpu/out/gpu_session.log
[ "${PIPESTATUS[0]}" = 0 ] || exit 1
export PYTHONPATH=$PWD/.gpu/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
export GOOSE_GGUF_DIR=$PWD/.gpu/model PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
DATA=.gpu/data
[ -d "$DATA" ] || DATA=../shared/data
$PY -m experiments.gpu_check --out .gpu/out --work .gpu/work --data-dir "$DATA" "$@" 2>&1 | tee -a .gpu/out/gpu_session.log
rc=${PIPESTATUS[0]}
if [ -n "${OUT:-}" ]; then
  for f in .gpu/out/gpu_check.json .gpu/out/cost_curve.png .gpu/out/projection.md .gpu/out/gpu_session.log; do
    [ -f "$f" ] && cp "$f" "$OUT/"
  done
fi
exit "$rc"

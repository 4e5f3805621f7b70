#!/usr/bin/env bash
# The smoke test on a GPU: the four sample corpora (built-in models) plus a Hugging Face model
# folder (a 2-layer GPT-2 written by benchmarks/make_hf_folder.py, tokenizer trained on the
# sample) on pretrain.jsonl and sft_chat.jsonl, each with precision bf16 and fp16 (GradScaler).
# Prints one line per run: corpus, model, precision, verdict, exit code, smoke and wall seconds.
#
#   benchmarks/gpu_smoke.sh          # on CUDA; without a CUDA device it says so and exits 0
#   benchmarks/gpu_smoke.sh --cpu    # the same runs on the CPU (fp32), to check the script
#
# PYTHON names the interpreter (default: python3) with preflight and the [hf] extra installed.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
device=cuda
[ "${1:-}" = "--cpu" ] && device=cpu
if [ "$device" = cuda ] && ! "$PY" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())'; then
  echo "gpu_smoke: torch sees no CUDA device; nothing run (benchmarks/gpu_smoke.sh --cpu runs the same on the CPU)"
  exit 0
fi
if [ "$device" = cuda ]; then
  precisions="fp16"
  "$PY" -c 'import sys, torch; sys.exit(not torch.cuda.is_bf16_supported())' && precisions="bf16 fp16"
  "$PY" -c 'import torch; print("gpu_smoke:", torch.cuda.get_device_name(0), "torch", torch.__version__, "CUDA", torch.version.cuda)'
else
  precisions="fp32"
  echo "gpu_smoke: --cpu: the same runs on the CPU in fp32"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
t0=$(date +%s.%N)
if ! "$PY" benchmarks/make_hf_folder.py "$tmp/gpt2" --corpus sample_data/pretrain.jsonl \
    >/dev/null 2>"$tmp/make.err"; then
  echo "gpu_smoke: could not write the HF folder (is the [hf] extra installed?):"
  tail -5 "$tmp/make.err"
  exit 2
fi
echo "gpu_smoke: HF folder (GPT-2, 2 layers, width 64, BPE trained on the sample) in $(since "$t0") s"

# name | data | extra arguments
runs=(
  "pretrain|sample_data/pretrain.jsonl|"
  "sft_chat|sample_data/sft_chat.jsonl|--preset sft-chat"
  "classification|sample_data/classification.jsonl|--preset classification --num-classes 4"
  "regression|sample_data/regression.jsonl|--preset regression"
  "pretrain|sample_data/pretrain.jsonl|--model hf:$tmp/gpt2"
  "sft_chat|sample_data/sft_chat.jsonl|--preset sft-chat --model hf:$tmp/gpt2"
)
printf '%-15s %-10s %-9s %-11s %4s %8s %8s\n' corpus model precision verdict exit smoke_s wall_s
n=0
for precision in $precisions; do
  for run in "${runs[@]}"; do
    IFS='|' read -r name data extra <<<"$run"
    n=$((n + 1))
    out="$tmp/out-$n"
    start=$(date +%s.%N)
    # shellcheck disable=SC2086  # $extra is a list of arguments
    "$PY" -m preflight smoke "$data" $extra --set "smoke.device=$device" \
      --set "smoke.precision=$precision" --out "$out" --format json -q --no-progress \
      2>"$tmp/err-$n"
    code=$?
    wall=$(since "$start")
    model=built-in
    [[ "$extra" == *--model* ]] && model=hf:gpt2
    if [ -f "$out/report.json" ]; then
      read -r verdict smoke_s < <("$PY" -c 'import json, sys
r = json.load(open(sys.argv[1]))
s = r.get("smoke") or {}
print(s.get("verdict", "-"), round(r.get("timings", {}).get("smoke", 0.0), 2))' "$out/report.json")
    else
      verdict="error" smoke_s="-"
    fi
    printf '%-15s %-10s %-9s %-11s %4s %8s %8s\n' "$name" "$model" "$precision" "$verdict" \
      "$code" "$smoke_s" "$wall"
    [ "$code" -ge 2 ] && sed 's/^/    /' "$tmp/err-$n" | tail -5
  done
done
exit 0

#!/usr/bin/env bash
# A real SGLang 0.5.23 server with the plugin on the lent H200 (issue 10): bare machine in, logs and tables out.
#
#   here:    bash scripts/serve_env/fetch_wheels.sh            (.whl/serve: SGLang + the wheels its server imports)
#   device:  OUT=... bash scripts/serve_run.sh serve           carry [".whl/serve"]
#   here:    bash scripts/serve_env/fetch_wheels.sh eval     (.whl/eval: lm-eval trimmed to GSM8K; .whl/gsm8k: the data)
#   device:  OUT=... bash scripts/serve_run.sh eval            carry [".whl/serve", ".whl/eval", ".whl/gsm8k"]
#
# serve: (1) a tiny MiniMax-M3 (tests/sglang_env/tiny_m3.py, dummy weights) with --kv-cache-dtype mxfp4 and SGLang's
#        defaults (radix cache, chunked prefill, prefill and decode CUDA graphs): atom_mxfp4/evals/serve_check.py's scenarios
#        (prefix reuse, chunked prefill, mixed batches, a 64-request burst with cancels and leak checks, graphs);
#        (2) agreement: the same prompts on mxfp4 (default index-K and the other index-K dtype), fp8_e4m3 and bf16 KV
#        caches (same weights, eager), greedy tokens, logprobs and last hidden states compared against bf16 (SGLang's
#        own MiniMax sparse backend).
#        With T_GPU_TESTS=seconds, then tests/gpu and tests/test_triton_ops.py on the GPU (the kernels just served);
#        SERVE_AGREEMENT=0 leaves out (2), SERVE_DEFAULT=0 leaves out (1) (an agreement-only call: ~6 min);
#        SERVE_TOPK=N serves the model with N top-k blocks (default 2).
# tp:    TP1 / TP2 / TP4 servers (4 GPUs), agreement against TP1, bursts (issue 15; not run yet: no 4-GPU kind lent).
# speed: issue 39: decode tokens/s and ms per output token (8 / 64 at once) and TTFT (2K / 8K) with CUDA graphs on and
#        off (--disable-cuda-graph), and a baseline tree's eager server when .base/ is carried (BASE_COMMIT names it;
#        SPEED_BASE=0 leaves it out): $RES/speed.md. SPEED_SERVERS="label:flag,value,... ..." picks the servers
#        (default "graphs: eager:--disable-cuda-graph"; a bf16-graphs / bf16-eager pair: SGLang's own bf16 path).
# bench: issue 40: SGLang's own benchmark client against bf16 / fp8 / mxfp4 servers (atom_mxfp4/evals/serving.py):
#        $RES/serving.md, serving.png, ledger_rows.csv, results.jsonl (BENCH_* variables split the grid over calls).
# pressure: issue 40: KV exhaustion with retraction, aborts in chunked prefill and decode, a 2,000-request soak.
# eval:  atom-mxfp4 eval gsm8k --limit 50 through lm-eval against the mxfp4 server (GSM8K_BASELINE=1: A/B against a
#        bf16 server, McNemar on the per-question outcomes).
# Results: $OUT/serve/*.json, *.md, server logs, packed in $OUT/serve_<mode>.tar.gz (+ the summary .md files).
set -u -o pipefail
MODE=${1:-serve}
ROOT=$(pwd)
: "${OUT:?OUT must name the results folder}"
RES="$OUT/serve"
mkdir -p "$RES"
exec > >(tee -a "$OUT/serve_run_$MODE.log") 2>&1
export PYTHONUNBUFFERED=1
SOURCES=$(bash scripts/sources_hash.sh)  # what runs (the device copy's git metadata may be stale)
COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo none)}
echo "== serve_run.sh $MODE $(date -u +%FT%TZ) commit $COMMIT sources $SOURCES"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true

# ---- 1. packages: carried wheels and atom_mxfp4 itself (with its sglang.srt.plugins entry point) into one folder
SITE=/tmp/sgl_site
mkdir -p "$SITE"
WHEELS=$(ls "$ROOT/.whl/serve"/*.whl 2>/dev/null)
[ "$MODE" = eval ] && WHEELS="$WHEELS $(ls "$ROOT/.whl/eval"/*.whl 2>/dev/null)"
STAMP=$(ls -l $WHEELS 2>/dev/null | awk '{print $5, $NF}' | md5sum | cut -c1-16)  # the wheels' names and sizes
if [ -n "${WHEELS// /}" ] && [ "$(cat "$SITE/.wheels" 2>/dev/null)" != "$STAMP" ]; then  # once per warm machine
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
    $WHEELS || { echo "wheel install failed"; exit 2; }
  echo "$STAMP" > "$SITE/.wheels"
fi
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --no-cache-dir --upgrade \
  --target "$SITE" "$ROOT" || { echo "atom_mxfp4 install failed"; exit 2; }
export PYTHONPATH="$SITE"
python3 -c "import sglang, atom_mxfp4, torch, triton; print('sglang', sglang.__version__, 'torch', torch.__version__, \
'triton', triton.__version__)" || { echo "sglang not importable (for eval: run the serve call first, machine warm)"; exit 2; }

# ---- 2. the server environment (tests/sglang_env: stand-in sgl_kernel, no JIT kernels, scaled dummy weights)
eval "$(python3 -c "
import shlex, sys; sys.path.insert(0, '$ROOT/tests')
from sglang_env import server_env
env = server_env('cuda', {'PYTHONPATH': '$SITE'})
print(' '.join(f'export {k}={shlex.quote(v)};' for k, v in env.items()))")"
export ATOM_SGLANG_ENV_DUMMY_INIT=scaled
if ! python3 "$ROOT/tests/sglang_env/rust_tree_core_check.py"; then
  export SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND=python
  echo "== SGLang's prebuilt Rust radix tree misreads this torch's tensors: using SGLang's Python tree core"
fi
# the modules a server process imports, in one quick process: an import failure costs seconds here, minutes below
python3 -c "import sglang.srt.entrypoints.http_server, sglang.srt.managers.scheduler, sglang.srt.models.minimax_m3, \
sglang.srt.layers.attention.triton_backend, sglang.srt.model_executor.model_runner; print('== server modules import')" \
  || { echo "== a server module does not import: stopping before any server start"; exit 2; }
# SERVE_TOPK=16: the sparse layers' top-k as the real M3's (small decode batches then run the split merge over a cluster)
MODEL=$(python3 "$ROOT/tests/sglang_env/tiny_m3.py" /tmp/tiny_m3 ${SERVE_TOPK:+--topk "$SERVE_TOPK"})
cd /tmp  # nothing in the working directory may shadow an installed package
COMMON="--model-path $MODEL --load-format dummy --mem-fraction-static 0.3 --random-seed 0"
CHECK="python3 -m atom_mxfp4.evals.serve_check run --out $RES --start-timeout 420"
STATUS=0

if [ "$MODE" = serve ]; then
  # (1) defaults: radix cache, chunked prefill (8192 here), prefill + decode CUDA graphs (SERVE_DEFAULT=0 leaves it out)
  if [ "${SERVE_DEFAULT:-1}" = 1 ]; then
    timeout 250 $CHECK --label mxfp4 --burst 64 --max-prompt 6000 \
      -- $COMMON --kv-cache-dtype mxfp4 || STATUS=1
  fi
  if [ "${SERVE_AGREEMENT:-1}" = 1 ]; then  # SERVE_AGREEMENT=0: the default server's scenarios only (~2 min)
    # (2) agreement, eager (graph capture of the baseline takes ~40 s per batch size): mxfp4 / fp8 / bf16 KV caches on
    # the same weights, three servers at once (small pools: --max-total-tokens bounds each whatever the others hold)
    # + mxfp4 K / V with the other index-K dtype than the default (ATOM_MXFP4_INDEX_K_DTYPE, issue 13)
    OTHER_IDX=$(python3 -c "from atom_mxfp4.index_k import DEFAULT_INDEX_K_DTYPE as d; print('mxfp4' if d == 'fp8' else 'fp8')")
    port=31010; pids=""
    for kv in mxfp4 mxfp4-idx-$OTHER_IDX fp8_e4m3 bf16; do
      dtype=${kv%%-idx-*}; idx=""; [ "$dtype" = "$kv" ] || idx="ATOM_MXFP4_INDEX_K_DTYPE=${kv##*-idx-}"
      backend=""; [ "$dtype" = mxfp4 ] || backend="--attention-backend triton"
      port=$((port + 1))
      # 320 s: SGLang's own Triton backend compiles its kernels at its first requests (the baselines were ready only
      # ~200 s after their start in the 2026-12-04 clamp session's run, four servers starting at once; 200 cut them)
      env $idx timeout 320 $CHECK --label agree-$kv --scenarios startup,agreement --hidden --port $port \
        -- $COMMON --kv-cache-dtype $dtype $backend --disable-cuda-graph --enable-return-hidden-states \
        --mem-fraction-static 0.4 --max-total-tokens 262144 > "$RES/agree-$kv.out" 2>&1 &
      pids="$pids $!"
    done
    wait $pids  # by pid: a bare `wait` also waits for the tee of this script's output, which never ends
    cat "$RES"/agree-*.out
    grep -q "agree-.*: ok;" "$RES"/agree-mxfp4.out || STATUS=1
    grep -q "agree-.*: ok;" "$RES"/agree-mxfp4-idx-$OTHER_IDX.out || STATUS=1
    for kv in mxfp4 mxfp4-idx-$OTHER_IDX fp8_e4m3; do
      python3 -m atom_mxfp4.evals.serve_check compare "$RES/agree-$kv.json" "$RES/agree-bf16.json" \
        --output "$RES/agreement-$kv-vs-bf16.md" || STATUS=1
    done
    # the default server (prefill + decode CUDA graphs) against the eager one: the same kernels, so the same numbers
    if [ "${SERVE_DEFAULT:-1}" = 1 ]; then
      python3 -m atom_mxfp4.evals.serve_check compare "$RES/mxfp4.json" "$RES/agree-mxfp4.json" \
        --output "$RES/graphs-vs-eager-mxfp4.md" || STATUS=1
    fi
  fi
  # the GPU tests in the same call (the kernels the servers just ran): tests/gpu + the op tests compiled for the GPU
  if [ "${T_GPU_TESTS:-0}" -gt 0 ]; then
    (cd "$ROOT" && timeout "$T_GPU_TESTS" python3 -m pytest -q -m "gpu or not gpu" tests/gpu tests/test_triton_ops.py \
      -p no:cacheprovider 2>&1 | tail -40) || STATUS=1
  fi
elif [ "$MODE" = tp ]; then
  # tensor parallel (needs a kind with 4 GPUs: nvidia-h200-x4): the TP variant of the tiny model (16 q / 4 KV / 4
  # index heads: 1 KV head per rank at TP4, as the real M3), SGLang's defaults, TP1 / TP2 / TP4 one after the other;
  # agreement of TP2 / TP4 against TP1 on the same weights, a burst with cancels and the leak checks on every rank
  MODEL_TP=$(python3 "$ROOT/tests/sglang_env/tiny_m3.py" /tmp/tiny_m3_tp --tp)
  for tp in 1 2 4; do
    timeout 180 $CHECK --label tp$tp --scenarios startup,burst,agreement --burst 64 \
      -- --model-path $MODEL_TP --load-format dummy --mem-fraction-static 0.3 --random-seed 0 \
      --kv-cache-dtype mxfp4 --tp-size $tp || STATUS=1
  done
  for tp in 2 4; do
    python3 -m atom_mxfp4.evals.serve_check compare "$RES/tp$tp.json" "$RES/tp1.json" \
      --output "$RES/agreement-tp$tp-vs-tp1.md" || STATUS=1
  done
elif [ "$MODE" = speed ]; then
  # issue 39: what eager attention costs a user: the speed scenario (decode tokens/s at 8 and 64 concurrent, TTFT at
  # 2K / 8K prompt tokens) on the default server (CUDA graphs) and with --disable-cuda-graph; with a baseline tree
  # carried in .base (BASE_COMMIT), its eager server too, installed into a copy of the same site
  SERVERS=${SPEED_SERVERS-"graphs: eager:--disable-cuda-graph"}  # SPEED_SERVERS="": the baseline alone
  if [ "${SPEED_BASE:-1}" = 1 ] && [ -f "$ROOT/.base/pyproject.toml" ]; then  # SPEED_BASE=0: not the baseline
    rm -rf /tmp/sgl_site_base && cp -r "$SITE" /tmp/sgl_site_base
    python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --no-cache-dir --upgrade \
      --target /tmp/sgl_site_base "$ROOT/.base" && SERVERS="$SERVERS base-eager:--disable-cuda-graph"
  fi
  for entry in $SERVERS; do
    label=${entry%%:*}; flags=${entry#*:}; flags=${flags//,/ }  # SPEED_SERVERS: "label:flag,value,..." each
    kv="--kv-cache-dtype mxfp4"; case " $flags " in *" --kv-cache-dtype "*) kv="" ;; esac  # a server's own dtype
    site=$SITE; [ "${label#base-}" != "$label" ] && site=/tmp/sgl_site_base  # the server's package; the driver: ours
    # the server's PYTHONPATH: the environment's (tests/sglang_env's stand-ins first), with its site swapped in
    # ATOM_MXFP4_HOST_METER: our servers log their host time per batch (model_patches/sglang/meter.py), read back
    # per decode run (serve_check.host_time); a tree without the meter ignores it
    timeout ${T_SPEED:-240} $CHECK --label speed-$label --scenarios startup,speed \
      --server-env "PYTHONPATH=${PYTHONPATH/$SITE/$site}" --server-env "ATOM_MXFP4_HOST_METER=${SPEED_METER:-50}" \
      -- $COMMON $kv $flags || STATUS=1
  done
  python3 - "$RES" "${BASE_COMMIT:-base}" <<'PY' || STATUS=1
import json, pathlib, sys
res, base = pathlib.Path(sys.argv[1]), sys.argv[2]
runs = {p.stem[len("speed-"):]: json.loads(p.read_text()) for p in sorted(res.glob("speed-*.json"))}
keys = ["decode_c8", "decode_c64", "ttft_2048_ms", "ttft_8192_ms"]
lines = ["| server | decode tok/s, 8 at once | ms / output token, 8 | decode tok/s, 64 at once | ms / output token, 64 "
         "| TTFT 2K prompt (ms) | TTFT 8K prompt (ms) |", "|---|---:|---:|---:|---:|---:|---:|"]
for label, run in runs.items():
    speed = run.get("scenarios", {}).get("speed", {})
    cells = []
    for k in keys:
        if k.startswith("decode"):
            cells += [speed.get(k, {}).get("output_tokens_per_s"), speed.get(k, {}).get("ms_per_output_token")]
        else:
            cells.append(speed.get(k))
    lines.append(f"| {label}{' (' + base + ')' if label.startswith('base') else ''} | "
                 + " | ".join("-" if c is None else str(c) for c in cells) + " |")
for prefix in ("", "bf16-"):  # ours; SGLang's own bf16 path where SPEED_SERVERS named bf16-graphs / bf16-eager
    graphs, eager = (runs.get(prefix + k, {}).get("scenarios", {}).get("speed", {}) for k in ("graphs", "eager"))
    if not (graphs and eager):
        continue
    for k in keys[:2]:
        lines.append(f"\n{prefix}{k}: graphs / eager = "
                     f"{graphs[k]['output_tokens_per_s'] / eager[k]['output_tokens_per_s']:.2f}x (tokens/s), "
                     f"{eager[k]['ms_per_output_token'] / graphs[k]['ms_per_output_token']:.2f}x (ms per output token)")
    lines.append(f"{prefix}TTFT 8K: eager / graphs = {eager['ttft_8192_ms'] / graphs['ttft_8192_ms']:.2f}x")
ours = [(label, k, run["scenarios"]["speed"][k]["atom_host_us_per_decode_batch"]) for label, run in runs.items()
        for k in keys[:2] if "atom_host_us_per_decode_batch" in run.get("scenarios", {}).get("speed", {}).get(k, {})]
if ours:  # how much of a decode step's host time is our backend's (ATOM_MXFP4_HOST_METER)
    lines += ["", "Our host time per decode batch (a graph server replays the attention inside its graph: metadata "
              "only, 0 layers)", "",
              "| server | decode run | our host us per decode batch (metadata + attention) | layers | of the ms per "
              "output token |", "|---|---|---:|---:|---:|"]
    for label, k, t in ours:
        step = runs[label]["scenarios"]["speed"][k]["ms_per_output_token"]
        lines.append(f"| {label} | {k} | {t['total_us']} ({t['metadata_us']} + {t['attention_us']}) | {t['layers']} "
                     f"| {t['total_us'] / 1e3 / step:.1%} |")
(res / "speed.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
elif [ "$MODE" = bench ]; then
  # issue 40: SGLang's own client (atom_mxfp4/evals/serving.py) against bf16 / fp8 / mxfp4 servers of one TP4 rank of
  # the real M3 (tests/sglang_env/tiny_m3.py --rank), the same --mem-fraction-static; then the capacity-bound run (the
  # same KV bytes for each). Results accumulate in $BENCH_DIR while the machine stays warm, so the grid may be split
  # over calls (BENCH_KV, BENCH_INPUTS, BENCH_CONCURRENCY, BENCH_CAPACITY=0/1); each call writes the report so far.
  # CAPACITY_OUTPUT: output tokens per capacity request; CAPACITY_BYTES (e.g. bf16=5632,mxfp4=1880, the ledger's
  # `serve pool` rows): skips the server starts that only measure each pool (about 100 s each on the H100).
  MODEL_RANK=$(python3 "$ROOT/tests/sglang_env/tiny_m3.py" /tmp/tiny_m3_rank --rank)
  BENCH_DIR=${BENCH_DIR:-/tmp/serving_bench}
  SERVING="python3 -m atom_mxfp4.evals.serving"
  SERVER_ARGS="--load-format dummy --random-seed 0 --mem-fraction-static ${BENCH_MEM:-0.5} ${BENCH_ARGS:-}"  # BENCH_ARGS: more, for every server
  if [ -n "${BENCH_INPUTS:-2048,8192,32768}" ] && [ "${BENCH_GRID:-1}" = 1 ]; then
    timeout ${T_BENCH:-540} $SERVING grid --model "$MODEL_RANK" --out "$BENCH_DIR" --kv "${BENCH_KV:-bf16,fp8_e4m3,mxfp4}" \
      --inputs "${BENCH_INPUTS:-2048,8192,32768}" --concurrency "${BENCH_CONCURRENCY:-1,8,64,256}" -- $SERVER_ARGS \
      || STATUS=1
  fi
  if [ "${BENCH_CAPACITY:-0}" = 1 ]; then
    timeout ${T_CAPACITY:-540} $SERVING capacity --model "$MODEL_RANK" --out "$BENCH_DIR" \
      --kv "${CAPACITY_KV:-${BENCH_KV:-bf16,fp8_e4m3,mxfp4}}" --capacity-input "${CAPACITY_INPUT:-32768}" \
      --bf16-fits "${CAPACITY_BF16_FITS:-8}" ${CAPACITY_OUTPUT:+--capacity-output "$CAPACITY_OUTPUT"} \
      ${CAPACITY_BYTES:+--bytes-per-token "$CAPACITY_BYTES"} -- $SERVER_ARGS || STATUS=1
  fi
  GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  $SERVING report --out "$BENCH_DIR" --commit "$COMMIT" --gpu "$GPU" \
    --command "bash scripts/serve_run.sh bench (atom_mxfp4.evals.serving)" || STATUS=1
  cp "$BENCH_DIR"/serving.md "$BENCH_DIR"/serving.png "$BENCH_DIR"/ledger_rows.csv "$BENCH_DIR"/results.jsonl "$RES"/ \
    2>/dev/null
  for log in "$BENCH_DIR"/server-*.log; do  # each server's start and last lines (a server that never came up says why)
    [ -e "$log" ] && { head -40 "$log"; echo "[...]"; tail -200 "$log"; } > "$RES/$(basename "$log")"
  done
elif [ "$MODE" = pressure ]; then
  # issue 40: the server under pressure (atom_mxfp4/evals/serve_pressure.py), SGLang's defaults otherwise.
  # (1) exhaustion on a small pool: first as it comes (reported: SGLang may queue rather than run out), then with
  #     SGLang's retraction switch (asserted); (2) aborts and the soak on a default server (CUDA graphs on)
  timeout ${T_EXHAUST:-200} $CHECK --label exhaustion-natural --scenarios startup,exhaustion \
    --exhaustion-requests 16 --exhaustion-alone 0 -- $COMMON --kv-cache-dtype mxfp4 --max-total-tokens 16384 \
    || echo "== exhaustion without the retraction switch: no retraction (reported, not asserted)"
  timeout ${T_EXHAUST:-300} $CHECK --label exhaustion --scenarios startup,exhaustion --exhaustion-requests 16 \
    --exhaustion-alone ${EXHAUSTION_ALONE:-8} --server-env SGLANG_TEST_RETRACT=1 \
    --server-env SGLANG_TEST_RETRACT_INTERVAL=${RETRACT_INTERVAL:-100} \
    -- $COMMON --kv-cache-dtype mxfp4 --max-total-tokens 16384 || STATUS=1
  timeout ${T_SOAK:-420} $CHECK --label pressure --scenarios startup,aborts,soak --aborts ${ABORTS:-24} \
    --soak ${SOAK:-2000} --soak-every 200 --soak-concurrency 32 --max-prompt 2048 \
    -- $COMMON --kv-cache-dtype mxfp4 || STATUS=1
elif [ "$MODE" = eval ]; then
  DATA="$ROOT/.data/gsm8k"
  if [ ! -f "$DATA/test.jsonl" ] && [ -f "$ROOT/.whl/gsm8k/gsm8k.tar.xz" ]; then
    mkdir -p "$ROOT/.data" && tar -xJf "$ROOT/.whl/gsm8k/gsm8k.tar.xz" -C "$ROOT/.data"
  fi
  [ -f "$DATA/test.jsonl" ] || { echo "no GSM8K data carried (.whl/gsm8k/gsm8k.tar.xz or .data/gsm8k)"; exit 2; }
  start() {  # $1 label, $2 port, rest: server args; leaves the server running (its process group id in $RES)
    local label=$1 port=$2; shift 2
    setsid python3 -c "import sys; from sglang.cli.main import main; sys.argv[0] = 'sglang'; main()" serve $COMMON \
      --port "$port" "$@" > "$RES/server-gsm8k-$label.log" 2>&1 &
    echo $! > "$RES/pid-$label"
  }
  ready() {  # $1 label
    for _ in $(seq 300); do grep -q "ready to roll" "$RES/server-gsm8k-$1.log" && return 0; sleep 1; done
    tail -30 "$RES/server-gsm8k-$1.log"; return 1
  }
  start mxfp4 31001 --kv-cache-dtype mxfp4
  if [ "${GSM8K_BASELINE:-0}" = 1 ]; then  # one after the other: each sizes its pool from the memory free at start
    ready mxfp4 && start bf16 31002 --kv-cache-dtype bf16 --attention-backend triton --disable-cuda-graph \
      --mem-fraction-static 0.6
    BASELINE="--baseline-url http://127.0.0.1:31002"; ready bf16 || STATUS=1
  fi
  if ready mxfp4 && [ "$STATUS" = 0 ]; then
    timeout 420 python3 -m atom_mxfp4.cli eval gsm8k --url http://127.0.0.1:31001 ${BASELINE:-} --data-dir "$DATA" \
      --limit 50 --num-concurrent 16 --max-gen-toks 256 --output "$RES/gsm8k.json" > "$RES/gsm8k.md" || STATUS=1
  else
    STATUS=1
  fi
  for f in "$RES"/pid-*; do kill -TERM -- -"$(cat "$f")" 2>/dev/null; done
  sleep 3
else
  echo "usage: OUT=... bash scripts/serve_run.sh serve|speed|bench|pressure|eval|tp"; exit 2
fi

cp "$RES"/*.md "$OUT"/ 2>/dev/null
tar -czf "$OUT/serve_$MODE.tar.gz" -C "$RES" . && rm -rf "$RES"
echo "== done, status $STATUS"
exit $STATUS

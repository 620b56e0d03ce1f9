#!/usr/bin/env bash
# Live check on a CUDA machine: the main job, then every lesson's code in live mode
# (as scripts, via tools/run_lesson.py), most important first, within a time budget.
# Then the README's two-rank torchrun command on its own: NCCL with one rank per GPU when
# nvidia-smi lists two GPUs or more, else two Gloo ranks on the CPU (NCCL refuses two ranks
# on one GPU), as kitlib.capture.distributed.torchrun_plan/torchrun_command decide.
# Writes into ${OUT:-live_check_out}: live_log.txt, report.tsv, figures.tar.gz, bundles.tar.gz.
#   BUDGET_S   seconds after which no further step is started (default 420)
#   LESSONS    the lessons to run, in order (default: all, most important first)
set -u
OUT=${OUT:-live_check_out}; mkdir -p "$OUT"
BUDGET_S=${BUDGET_S:-420}
T0=$(date +%s)
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg KITLIB_MODE=live
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD"
log="$OUT/live_log.txt"
echo "start $(date -u +%FT%TZ) on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)" | tee "$log"
printf 'what\tstatus\tseconds\n' > "$OUT/report.tsv"
run() {  # run NAME TIMEOUT CMD...
  local name=$1 lim=$2; shift 2
  local now=$(( $(date +%s) - T0 ))
  if [ "$now" -gt "$BUDGET_S" ]; then printf '%s\tskipped (budget)\t0\n' "$name" >> "$OUT/report.tsv"; return; fi
  local t=$(date +%s)
  echo "=== $name (at ${now}s)" | tee -a "$log"
  timeout "$lim" "$@" >> "$log" 2>&1; local rc=$?
  printf '%s\t%s\t%s\n' "$name" "$([ $rc = 0 ] && echo ok || echo "rc=$rc")" "$(( $(date +%s) - t ))" >> "$OUT/report.tsv"
}
run "kitlib profile" 240 python3 -m kitlib profile --no-progress
for nb in ${LESSONS:-00 01 02 03 05 07 08 04 09 10 12 06 11}; do
  lim=240; [ "$nb" = 12 ] && lim=600   # lesson 12 runs torchrun twice (Gloo on the CPU: ~47 s a run on 2 cores)
  run "lesson $nb" "$lim" python3 tools/run_lesson.py lessons/${nb}_*.ipynb --figures "$OUT/fig"
done
# the two-rank command a student types (README "Several ranks"), with a straggler, then read back
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ "$ngpu" -ge 2 ]; then ranks=(--nproc_per_node="$ngpu" -m kitlib profile --device cuda); backend=nccl
else ranks=(--nproc_per_node=2 -m kitlib profile --device cpu --workers 0); backend=gloo; fi
ranks_out="runs/live_check_ranks_$(date +%s)"
run "torchrun $backend ($ngpu GPUs)" 600 python3 -m torch.distributed.run --standalone "${ranks[@]}" \
  --recipe light --steps 3 --no-progress --straggler-rank 1 --straggler-ms 500 --out "$ranks_out"
[ -d "$ranks_out" ] && run "torchrun $backend: load_traces" 120 python3 -c "import sys, kitlib; from kitlib.analyses import collectives as c
t = kitlib.load_traces(sys.argv[1]); s = c.straggler_summary(t); print(t, '| straggler:', s['rank'], round(s['late_by_ms_median'], 1), 'ms')
sys.exit(t.backend != sys.argv[2] or s['rank'] != 1)" "$ranks_out" "$backend"
run "matched cold_start (torch.profiler)" 120 python3 -c "from kitlib import capture as c; c.capture(None, 'cold_start', 'runs/matched_cold_start', progress=False)"
run "matched nsys" 180 python3 -m kitlib.capture.nsys_recipes capture --recipe matched --out runs/matched_nsys
cat "$OUT/report.tsv" | tee -a "$log"
tar czf "$OUT/figures.tar.gz" -C "$OUT" fig 2>/dev/null; rm -rf "$OUT/fig"
ls -d runs/*/ 2>/dev/null | tee -a "$log"
tar czf "$OUT/bundles.tar.gz" --exclude='*.qdstrm' --exclude='*.nsys-rep' runs 2>/dev/null
ls -la "$OUT" | tee -a "$log"

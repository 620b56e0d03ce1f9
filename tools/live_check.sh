#!/usr/bin/env bash
# Live check on a CUDA machine: the main job, then every lesson's code in live mode
# (as scripts, via tools/run_lesson.py), most important first, within a time budget.
# Writes into ${OUT:-live_check_out}: live_log.txt, report.tsv, figures.tar.gz, bundles.tar.gz.
#   BUDGET_S   seconds after which no further lesson is started (default 420)
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
for nb in 00 01 02 03 05 07 08 04 09 10 06 11; do
  run "lesson $nb" 240 python3 tools/run_lesson.py lessons/${nb}_*.ipynb --figures "$OUT/fig"
done
run "matched cold_start (torch.profiler)" 120 python3 -c "from kitlib import capture as c; c.capture(None, 'cold_start', 'runs/matched_cold_start', progress=False)"
run "matched nsys" 180 python3 -m kitlib.capture.nsys_recipes capture --recipe matched --out runs/matched_nsys
cat "$OUT/report.tsv" | tee -a "$log"
tar czf "$OUT/figures.tar.gz" -C "$OUT" fig 2>/dev/null; rm -rf "$OUT/fig"
ls -d runs/*/ 2>/dev/null | tee -a "$log"
tar czf "$OUT/bundles.tar.gz" --exclude='*.qdstrm' --exclude='*.nsys-rep' runs 2>/dev/null
ls -la "$OUT" | tee -a "$log"

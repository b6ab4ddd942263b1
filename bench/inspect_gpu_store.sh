#!/usr/bin/env bash
# Researcher tools on a campaign store (GPU verification issue 24, item 4),
# e.g. the store the GPU soak brought back: for every campaign, `kopt report`
# rendered by headless Chromium (DOM with its charts, and a PNG screenshot),
# `kopt trace` (checked as Chrome trace-event JSON), `kopt export
# flashinfer-trace` validated against tests/data/flashinfer-bench's schema,
# and `kopt show candidate` of the best candidate, of an LLM candidate (with
# its prompt and answer) and of an agent candidate. Prints a summary table.
#
# Usage: bench/inspect_gpu_store.sh DB OUTDIR [KOPT]   (KOPT default: build/bin/kopt)
# Needs chromium (Debian package, installed by scripts/test) and python3.
# Exit 0 when every step worked, 1 otherwise (OUTDIR/summary.txt says which).
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
db=${1:?usage: $0 DB OUTDIR [KOPT]}
out=${2:?usage: $0 DB OUTDIR [KOPT]}
kopt=${3:-$here/build/bin/kopt}
mkdir -p "$out"
out=$(cd "$out" && pwd)
[[ -f $db ]] || { echo "no store $db" >&2; exit 2; }
# Work on a copy: the researcher tools only read, but a store carried back
# from another machine should stay as it came.
cp "$db" "$out/store.db"
db=$out/store.db
chromium=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
fib=$here/tests/data/flashinfer-bench
fails=0
summary=$out/summary.txt
: >"$summary"
row() { printf '%-9s %-22s %-6s %s\n' "$@" | tee -a "$summary"; }
bad() { fails=$((fails + 1)); }

q() {  # SQL -> first column of every row (python3: the GPU store may come without the sqlite3 CLI)
  python3 -c 'import sqlite3,sys
for r in sqlite3.connect(sys.argv[1]).execute(sys.argv[2]): print(r[0] if r[0] is not None else "")' "$db" "$1"
}

row campaign step result detail
for cid in $(q "SELECT id FROM campaigns ORDER BY id"); do
  name=$(q "SELECT o.name FROM campaigns c JOIN operators o ON o.id = c.operator_id WHERE c.id = $cid")
  d=$out/c$cid
  mkdir -p "$d"
  # report, then Chromium: the DOM it built (every chart with its marks) and a screenshot.
  if "$kopt" --db "$db" report "$cid" -o "$d/report.html" >"$d/report.log" 2>&1; then
    sz=$(stat -c %s "$d/report.html")
    if [[ -n $chromium ]]; then
      common=(--headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run
              --user-data-dir="$d/chromium-profile" --proxy-server=127.0.0.1:9 --hide-scrollbars
              --force-device-scale-factor=1)
      timeout 60 "$chromium" "${common[@]}" --dump-dom "file://$d/report.html" >"$d/dom.html" 2>"$d/chromium.log"
      charts=$(python3 -c 'import re,sys
m=re.findall(r"<svg[^>]*data-chart=\"([^\"]+)\" data-marks=\"(\d+)\"", open(sys.argv[1]).read())
print(" ".join("%s:%s" % x for x in m) or "none")' "$d/dom.html")
      timeout 60 "$chromium" "${common[@]}" --window-size=1280,7000 --screenshot="$d/report.png" \
        "file://$d/report.html" >>"$d/chromium.log" 2>&1
      rm -rf "$d/chromium-profile"
      if [[ -s $d/report.png && $charts != none ]]; then
        row "$cid" "report+chromium" ok "$name: ${sz} B html, png $(stat -c %s "$d/report.png") B; charts(marks) $charts"
      else
        row "$cid" "report+chromium" FAIL "$name: html $sz B, charts $charts, png $( [[ -s $d/report.png ]] && echo yes || echo no) ($d/chromium.log)"; bad
      fi
    else
      row "$cid" "report" ok "$name: $sz B html; chromium not installed: not rendered"; bad
    fi
  else
    row "$cid" report FAIL "$(tail -1 "$d/report.log")"; bad
  fi
  # trace: Chrome trace-event JSON; events per category.
  if "$kopt" --db "$db" trace "$cid" -o "$d/trace.json" >"$d/trace.log" 2>&1; then
    det=$(python3 -c 'import json,sys,collections
j=json.load(open(sys.argv[1])); ev=j["traceEvents"] if isinstance(j,dict) else j
bad=[e for e in ev if not isinstance(e,dict) or "ph" not in e or "name" not in e]
c=collections.Counter(e.get("cat","-") for e in ev if e.get("ph")!="M")
print("%d events (%s)%s" % (len(ev), ", ".join("%s %d" % x for x in sorted(c.items())), "; %d malformed" % len(bad) if bad else ""))
sys.exit(1 if bad or not ev else 0)' "$d/trace.json")
    if [[ $? == 0 ]]; then row "$cid" trace ok "$det"; else row "$cid" trace FAIL "$det"; bad; fi
  else
    row "$cid" trace FAIL "$(tail -1 "$d/trace.log")"; bad
  fi
  # FlashInfer-Trace export, every file against the schema.
  if "$kopt" --db "$db" export "$cid" --format flashinfer-trace -o "$d/fib" --top 2 >"$d/export.log" 2>&1; then
    nf=0; nbad=0
    while IFS= read -r f; do
      rel=${f#"$d/fib/"}
      case $rel in definitions/*) def=Definition ;; solutions/*) def=Solution ;; *) def=Trace ;; esac
      nf=$((nf + 1))
      python3 "$fib/validate.py" "$fib/flashinfer-trace.schema.json" "$def" "$f" >>"$d/validate.log" 2>&1 || nbad=$((nbad + 1))
    done < <(find "$d/fib" -type f \( -name '*.json' -o -name '*.jsonl' \) | sort)
    ntr=$(cat "$d"/fib/traces/*/*/*.jsonl 2>/dev/null | wc -l)
    if [[ $nbad == 0 && $nf -gt 0 ]]; then
      row "$cid" flashinfer-trace ok "$nf files valid against the schema, $ntr trace lines"
    else
      row "$cid" flashinfer-trace FAIL "$nbad of $nf files invalid ($d/validate.log)"; bad
    fi
  else
    row "$cid" flashinfer-trace FAIL "$(tail -1 "$d/export.log")"; bad
  fi
  # show candidate: the best; an LLM candidate with its call; an agent candidate.
  best=$(q "SELECT best_candidate_id FROM campaigns WHERE id = $cid")
  llm=$(q "SELECT min(id) FROM candidates WHERE campaign_id = $cid AND origin = 'llm' AND llm_call_id IS NOT NULL")
  agent=$(q "SELECT min(id) FROM candidates WHERE campaign_id = $cid AND provider = 'agent' AND note LIKE 'agent %'")
  for pair in "best:$best" "llm:$llm" "agent:$agent"; do
    what=${pair%%:*}; id=${pair#*:}
    [[ -n $id ]] || continue
    if "$kopt" --db "$db" show candidate "$id" >"$d/show_${what}_$id.txt" 2>&1 &&
       "$kopt" --db "$db" show candidate "$id" --json >"$d/show_${what}_$id.json" 2>>"$d/show.log"; then
      det=$(python3 - "$d/show_${what}_$id.json" "$what" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
c = j
ev = j.get("evaluations", [])
r = j.get("research", {}) or {}
calls = r.get("llm_calls") or []
parts = ["%d evaluations" % len(ev), "source %d chars" % len(c.get("source", "") or ""),
         "outcome %s" % r.get("outcome")]
if sys.argv[2] == "llm":
    call = calls[0] if calls else {}
    parts.append("LLM call %s: prompt %d chars, response %d chars" % (
        call.get("id"), len(call.get("prompt", "") or ""), len(call.get("response", "") or "")))
    if not call.get("prompt") or not call.get("response"):
        print("; ".join(parts) + "; NO prompt/answer")
        sys.exit(1)
if sys.argv[2] == "agent":
    parts.append("note: %s" % (c.get("note") or "")[:70])
print("; ".join(parts))
PY
)
      st=$?
      if [[ $what == llm ]] && ! { grep -q -- "^--- system" "$d/show_${what}_$id.txt" && grep -q -- "^--- user" "$d/show_${what}_$id.txt"; }; then
        det="$det; the text output lacks the --- system / --- user sections"; st=1
      fi
      if [[ $st == 0 ]]; then row "$cid" "show $what $id" ok "$det"; else row "$cid" "show $what $id" FAIL "$det"; bad; fi
    else
      row "$cid" "show $what $id" FAIL "$(tail -1 "$d/show.log" "$d/show_${what}_$id.txt" 2>/dev/null | tail -1)"; bad
    fi
  done
done
echo "inspect: $fails problem(s); files in $out" | tee -a "$summary"
[[ $fails == 0 ]]

#!/usr/bin/env bash
# Issue 62's candidates on the lent GPU machine, as one prepared command (the device tool's
# `run`, from the repository root, with `carry: [".gpu"]`):
#
#   bash tools/device/candidates.sh
#
# Beforehand, here: the data into .gpu/ (which .git/info/exclude ignores), about 4 MB:
#   mkdir -p .gpu/multi30k && cp ../shared/data/multi30k/*.gz .gpu/multi30k/
# The teachers' translations for the distillation candidates go in .gpu/distilled/
# (<src>-<trg>.<trg>); any missing there is made on the device first by the shipped model of
# its direction (benchmarks/candidates.py --teachers), in one of the PARALLEL places while the
# other candidates start, and comes back in $OUT (distilled_<src>-<trg>.<trg>).
#
# It trains the candidates side by side (benchmarks/candidates.py, MINUTES of wall clock,
# PARALLEL at once), writes the report to $OUT, and for each direction whose best candidate
# beats the shipped model on validation exports it as the package would ship it
# (tools/export_pretrained.py: float16, about 16.5 MB, under the 16 MiB a returned file may
# weigh) with its manifest entry and the figures benchmarks/pretrained.py measures. The run
# folders stay on the machine (too large to return); the logs come back as one archive.
set -uo pipefail
: "${OUT:?set OUT, the folder whose files the device tool returns}"
MINUTES=${MINUTES:-7.5}
PARALLEL=${PARALLEL:-8}
DEVICE=${DEVICE:-cuda}
BASE=${BASE:-}
ONLY=${ONLY:-}
RUNS=${RUNS:-/tmp/candidates}
PYTHON=${PYTHON:-python3}
export CONVS2S_DATA_DIR=${CONVS2S_DATA_DIR:-$PWD/.gpu/multi30k}
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
if ! "$PYTHON" -c "import spacy" 2>/dev/null; then
  export PYTHONPATH=$PWD/tools/device/spacy_stand_in:$PYTHONPATH
  echo "spaCy is not here: its stand-in is on the path (no tutorial BLEU is reported)"
fi
"$PYTHON" -c "import torch; print('device:', torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'cpu')"

mkdir -p .gpu/distilled "$RUNS"
made_before=$(ls .gpu/distilled | tr "\n" " ")
"$PYTHON" benchmarks/candidates.py --device "$DEVICE" --parallel "$PARALLEL" \
  --minutes "$MINUTES" --runs "$RUNS" --distilled .gpu/distilled \
  --teachers src/convs2s/run/models \
  ${BASE:+--base "$BASE"} ${ONLY:+--only $ONLY} --json "$OUT/candidates.json"
status=$?
for f in $(ls .gpu/distilled); do  # the teachers' translations made here, for later runs
  case "$f" in *.partial) continue ;; esac
  case " $made_before " in *" $f "*) ;; *) cp ".gpu/distilled/$f" "$OUT/distilled_$f" ;; esac
done
tar -czf "$OUT/candidate_logs.tar.gz" -C "$RUNS" $(cd "$RUNS" && ls *.log 2>/dev/null)
[ $status -eq 0 ] || exit $status

# the best candidate of each direction, where it beats the shipped model on validation
"$PYTHON" - "$OUT/candidates.json" <<'PY' > "$RUNS/to_export.txt"
import json, sys
report = json.load(open(sys.argv[1]))
for direction, best in report["best"].items():
    if best["beats_shipped"]:
        print(direction, best["candidate"], report["candidates"][best["candidate"]]["command"])
PY
machine=$("$PYTHON" -c "import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'CPU')")
while read -r direction name cmd; do
  "$PYTHON" benchmarks/pretrained.py "$RUNS/$name" --device "$DEVICE" \
    --json "$OUT/pretrained_$direction.json" || continue
  "$PYTHON" -m tools.export_pretrained --run "$RUNS/$name" --direction "$direction" \
    --machine "$machine, lent, $(date +%F)" --command "$cmd" --scores "$OUT/pretrained_$direction.json" \
    && cp "src/convs2s/run/models/$direction.pt" "$OUT/$direction.pt"
done < "$RUNS/to_export.txt"
[ -s "$RUNS/to_export.txt" ] && cp src/convs2s/run/models/manifest.json "$OUT/manifest.json"
ls -la "$OUT"

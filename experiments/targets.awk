# The make targets of experiments/matrix.yaml, for the Makefile (which cannot import Python before
# the venv exists): one line per experiment, "target:ID:workload". With -v help=1, the lines of
# `make help` instead.
# tests/test_targets.py checks these against run/sweep/matrix.py.
/^experiments:/ { inexp = 1; next }
inexp && /^[^ #]/ { inexp = 0 }
inexp && /^  [A-Za-z0-9_]+:[ ]*$/ { if (id != "") emit(); id = $1; sub(":", "", id); target = ""; workload = ""; title = ""; source = "" }
inexp && /^    target:/ { target = $2 }
inexp && /^    workload:/ { workload = $2 }
inexp && /^    title:/ { title = $0; sub(/^    title:[ ]*/, "", title) }
inexp && /^    source:/ { source = $0; sub(/^    source:[ ]*/, "", source) }
END { if (id != "") emit() }
function emit() {
  if (help) printf "  %-24s %-4s %s (%s)\n", target, id, title, source
  else print target ":" id ":" workload
}

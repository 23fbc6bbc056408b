"""The report's tables: cells, headings, and each artifact's compact table with the paper's
numbers beside ours (one column per machine), cut into parts narrow enough for a PDF page."""

from __future__ import annotations

import math
from typing import Any

from analysis.claims.quantities import num

UNITS = {"_s": "s", "_pct": "%", "_gib": "GiB", "_mib": "MiB", "_s_per_it": "s/it"}
# "efficiency" is speed-up / GPUs only (V2's columns); the columns below keep the names of the
# paper's reference CSVs and the claims file, and read as what they are (PAPER_WORDS: the
# paper's own word for one, said once above the table).
LABELS = {"gpus": "GPUs", "s_per_it": "s/it", "pin_memory": "pin_memory",
          "image_size": "image size [px]", "htod_bytes_per_image": "HtoD [B/image]",
          "input_bytes_per_image": "input [B/image]",
          "efficiency_pct": "efficiency (speed-up / GPUs) [%]",
          "efficiency_vs_1gpu_pct": "speed-up vs 1 GPU [%]",
          "efficiency_vs_fp64_pct": "speed vs FP64 [%]",
          "efficiency_vs_unpinned_pct": "speed vs unpinned [%]",
          "spread_pct": "spread [%]"}  # fmt: skip
PAPER_WORDS = {
    "efficiency_vs_1gpu_pct": "speed-up vs 1 GPU is what the paper's Tables 2-3 call 'efficiency'"
}
# a PDF table of more columns than this is cut into parts that repeat the key columns
TEX_MAX_COLUMNS = 8


def cell(value: Any) -> str:
    """A table cell: 3 significant digits, integers as integers, on/off for booleans."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (int, float)):
        return num(value)
    return str(value)


def _number(text: str) -> bool:
    try:
        float(text.replace(",", ""))
    except ValueError:
        return False
    return True


def heading(col: str) -> str:
    if col in LABELS:
        return LABELS[col]
    for suffix, unit in UNITS.items():
        if col.endswith(suffix):
            return f"{col[: -len(suffix)].replace('_', ' ')} [{unit}]"
    return col.replace("_", " ")


def side_by_side(metas: list[dict[str, Any] | None], labels: list[str]) -> dict[str, Any] | None:
    """Keys, then per value column: the paper's, then each machine's (medians; min-max where a
    source has several values). Rows without a single value are left out; a table whose
    machines measured nothing is None, with `empty` saying so (the report writes a sentence)."""
    base = next((m for m in metas if m and m.get("compact") is not None), None)
    if base is None:
        return None
    cols = base.get("compact_columns") or (list(base["compact"][0]) if base["compact"] else [])
    stats = {c for c in cols if c.endswith(("_min", "_max")) or c == "repeats"}
    keys = [k for k in base.get("keys", []) if k in cols] or cols[:1]
    values = [c for c in cols if c not in keys and c not in stats]
    sources: list[tuple[str, list[dict[str, Any]]]] = []
    if base.get("paper_compact"):
        sources.append(("paper", base["paper_compact"]))
    for m, label in zip(metas, labels, strict=True):
        sources.append((label, (m or {}).get("compact") or []))
    rows: dict[tuple, dict[str, str]] = {}
    ranged: set[str] = set()  # the sources that printed a min-max
    repeats = 1
    for label, recs in sources:
        for r in recs:
            k = tuple(cell(r.get(key)) for key in keys)
            row = rows.setdefault(k, {})
            if label != "paper" and isinstance(r.get("repeats"), (int, float)):
                repeats = max(repeats, int(r["repeats"]))
            for v in values:
                text = cell(r.get(v))
                lo, hi = r.get(f"{v}_min"), r.get(f"{v}_max")
                if text and lo is not None and hi is not None and lo != hi:
                    text += f" ({cell(lo)}-{cell(hi)})"
                    ranged.add(label)
                row[f"{v}|{label}"] = text
    # a quantity no source has a value of (a CUDA metric on a CPU run) is no column
    values = [v for v in values if any(row.get(f"{v}|{label}") for row in rows.values()
                                       for label, _ in sources)]  # fmt: skip
    # a text column with one value in every row (status ok, memory kind host_peak_rss) is said
    # once above the table, not in a column of its own
    constant = {}
    for v in values:
        seen = {row.get(f"{v}|{label}", "") for row in rows.values() for label, _ in sources}
        if len(rows) > 1 and len(seen) == 1 and not _number(text := seen.pop()):
            constant[v] = text
    values = [v for v in values if v not in constant]
    ours = [label for label, _ in sources if label != "paper"]
    measured = any(row.get(f"{v}|{m}") for row in rows.values() for v in values for m in ours)
    names = [s for s, _ in sources]
    if names[1:] == labels[:1] and len(names) == 2:
        names = ["paper", "ours"]  # one machine: its label is on the first page
    many = len(sources) > 1
    # rows with a value of ours; where ours has none, the paper's own rows (GPU counts not run
    # here) are left out and counted: the claims quote them, reference/paper/ holds them
    mine = {k: any(row.get(f"{v}|{m}") for v in values for m in ours) for k, row in rows.items()}
    kept = [k for k, row in rows.items() if mine[k] or (not measured and any(row.values()))]
    body = [[*k, *(rows[k].get(f"{v}|{label}", "") for v in values for label, _ in sources)]
            for k in kept]  # fmt: skip
    return {
        "columns": [heading(k) for k in keys]
        + [f"{heading(v)}, {n}" if many else heading(v) for v in values for n in names],
        "rows": body,
        "sources": [s for s, _ in sources],
        "key_heads": [heading(k) for k in keys],
        "value_heads": [heading(v) for v in values],
        "names": names,
        "empty": not measured,
        "paper_rows_left_out": sum(1 for k in rows if not mine[k]) if measured else 0,
        "ranges": {"paper": "paper" in ranged, "ours": bool(ranged - {"paper"})},
        "repeats": repeats,
        "words": [w for c, w in PAPER_WORDS.items() if c in values],
        "constant": [f"{heading(v)} {text}" for v, text in constant.items()],
        "parts": [
            {**p, "rows": [r for r in body if any(r[c] for c in p["columns"][len(keys) :])]}
            for p in parts(len(keys), len(values), len(names))
        ],  # fmt: skip
    }


def parts(n_keys: int, n_values: int, n_names: int) -> list[dict[str, list[int]]]:
    """The PDF's cut of a wide table: each part repeats the key columns and takes as many whole
    value groups (a value for every source) as fit in TEX_MAX_COLUMNS; `values` are indices into
    value_heads, `columns` into the full row (side_by_side adds each part's rows: those with a
    value in it)."""
    per = max(1, (TEX_MAX_COLUMNS - n_keys) // max(n_names, 1))
    out = []
    for start in range(0, max(n_values, 1), per):
        vals = list(range(start, min(start + per, n_values)))
        cols = list(range(n_keys)) + [
            n_keys + v * n_names + i for v in vals for i in range(n_names)
        ]
        out.append({"values": vals, "columns": cols})
    return out


def intro(table: dict[str, Any], paper_csv: str | None, beyond: bool) -> dict[str, str]:
    """The sentence above a compact table: whose numbers (`lead`, then the paper's file `path`
    where there is one, set in code type by each template), and what brackets mean where drawn
    (`tail`)."""
    path = ""
    if "paper" in table["sources"]:
        lead = "Ours beside the paper's"
        path = f"reference/paper/{paper_csv or 'profiler_quotes.csv'}"
    elif beyond:
        lead = "Ours, beyond the paper (no published numbers)"
    else:
        lead = "Ours (the paper printed no numbers for this figure)"
    parts = []
    if table["ranges"]["ours"]:
        n = table["repeats"]
        parts.append(f"ours: medians of {n if n > 1 else 'the'} repeats, min-max in brackets")
    if table["ranges"]["paper"]:
        parts.append("the paper's: the range it quotes in brackets")
    parts += table["words"]
    if table.get("constant"):
        parts.append(f"every row: {', '.join(table['constant'])}")
    if table["paper_rows_left_out"]:
        parts.append(
            f"{table['paper_rows_left_out']} rows of the paper's for settings not run here left out"
        )
    return {"lead": lead, "path": path, "tail": (f"; {'; '.join(parts)}" if parts else "") + ":"}

"""The claims file, `reference/paper/claims.yaml`: its vocabulary (rules, ops, origins), loading,
and the check of every entry's fields without judging it (what `make test` validates).
"""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Any

import yaml

from run import store

CLAIMS_FILE = store.REFERENCE_DIR / "claims.yaml"
OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}
RULES = ("threshold", "compare", "trend", "extreme", "within", "correlation", "spread",
         "dominates", "step", "status", "all")  # fmt: skip
FIELDS = ("experiment", "statement", "source", "criterion")  # what every claim states
# Whose claim: the papers' (the default) or ours, beyond the paper (counted and shown apart).
PAPER, OURS = "paper", "ours"
ORIGINS = (PAPER, OURS)
WITHIN_SIDES = ("both", "below")


class ClaimError(ValueError):
    """claims.yaml is malformed: the message names the claim and the field."""


def load(path: Path = CLAIMS_FILE) -> list[dict[str, Any]]:
    claims = yaml.safe_load(path.read_text())["claims"]
    for cl in claims:
        check(cl)
    ids = [cl["id"] for cl in claims]
    if len(set(ids)) != len(ids):
        raise ClaimError(f"{path}: duplicate claim ids")
    return claims


def check(cl: dict[str, Any]) -> None:
    """A claim's fields, without judging it: what `make test` validates for every entry."""
    cid = cl.get("id", "?")
    for key in ("id", *FIELDS):
        if not cl.get(key):
            raise ClaimError(f"claim {cid}: missing '{key}'")
    if origin(cl) not in ORIGINS:
        raise ClaimError(f"claim {cid}: origin '{cl['origin']}' is not one of {', '.join(ORIGINS)}")
    rule = cl.get("rule")
    if rule is None:
        if not cl.get("not_implemented"):
            raise ClaimError(f"claim {cid}: no rule and no 'not_implemented' reason")
        return
    if rule not in RULES:
        raise ClaimError(f"claim {cid}: unknown rule '{rule}' (one of {', '.join(RULES)})")
    if rule == "all":  # each part is a rule of its own; `part` names it in the evidence
        if len(cl.get("parts") or []) < 2:
            raise ClaimError(f"claim {cid}: rule all needs two or more 'parts'")
        for i, part in enumerate(cl["parts"]):
            if not part.get("part"):
                raise ClaimError(f"claim {cid}: part {i + 1} has no 'part' name")
            check({"id": f"{cid} part {i + 1}", **{k: cl[k] for k in FIELDS}, **part})
        return
    if "op" in cl and cl["op"] not in OPS:
        raise ClaimError(f"claim {cid}: unknown op '{cl['op']}'")
    if cl.get("side", "both") not in WITHIN_SIDES:
        raise ClaimError(
            f"claim {cid}: side '{cl['side']}' is not one of {', '.join(WITHIN_SIDES)}"
        )
    needs = {"threshold": ("q", "than"), "compare": ("a", "b"), "trend": ("q", "along"),
             "extreme": ("q", "among", "expect"), "within": ("a", "b"),
             "correlation": ("a", "b", "r"), "spread": ("q", "among", "max_rel"),
             "dominates": ("q", "among", "over"), "step": ("q", "along", "than"),
             "status": ("cases",)}[rule]  # fmt: skip
    for key in needs:
        if key not in cl:
            raise ClaimError(f"claim {cid}: rule {rule} needs '{key}'")


def origin(cl: dict[str, Any]) -> str:
    """`paper` for the papers' claims, `ours` for those beyond the paper."""
    return cl.get("origin", PAPER)


def for_experiments(exps: list[str], claims: list[dict[str, Any]] | None = None) -> list[dict]:
    return [cl for cl in (claims if claims is not None else load()) if cl["experiment"] in exps]

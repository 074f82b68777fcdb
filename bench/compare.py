"""``bench compare RUN_A RUN_B``: the same items in two judged runs, a paired test per criterion.

Items pair on (scenario, repeat, criterion), judge criteria and deterministic checks alike
(``check:<id>``). A pair counts only when both runs have a real verdict; ERROR (or NA) on
either side leaves it unpaired, reported, never counted as a failure. McNemar's exact test (and
its mid-p) reads the discordant pairs: ``b`` passed in A only, ``c`` passed in B only.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.report import pct
from bench.stats import McNemar, mcnemar

__all__ = ["Comparison", "compare_results", "comparison_markdown", "load_results"]


@dataclass(frozen=True)
class Comparison:
    name: str
    pairs: int
    a_passed: int
    b_passed: int
    test: McNemar
    unpaired: int


def load_results(run_dir: Path, judge_dir: str = "judge") -> dict[str, Any]:
    path = run_dir / judge_dir / "results.json"
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _outcomes(results: dict[str, Any]) -> dict[tuple[str, str, int], str]:
    found: dict[tuple[str, str, int], str] = {}
    for item in results.get("items", []):
        where = (item["scenario_id"], item["repeat"])
        for criterion in item.get("criteria", []):
            found[(criterion["criterion"], *where)] = criterion["outcome"]
        for check in item.get("checks", []):
            found[(f"check:{check['id']}", *where)] = check["outcome"]
    return found


def compare_results(a: dict[str, Any], b: dict[str, Any]) -> list[Comparison]:
    """One comparison per criterion or check present in either run, in name order."""
    first, second = _outcomes(a), _outcomes(b)
    pairs: dict[str, list[tuple[str, str]]] = defaultdict(list)
    unpaired: dict[str, int] = defaultdict(int)
    for key in first.keys() | second.keys():
        name = key[0]
        left, right = first.get(key), second.get(key)
        if left in ("PASS", "FAIL") and right in ("PASS", "FAIL"):
            pairs[name].append((str(left), str(right)))
        else:
            unpaired[name] += 1
    found = []
    for name in sorted(pairs.keys() | unpaired.keys()):
        both = pairs[name]
        only_a = sum(1 for x, y in both if x == "PASS" and y == "FAIL")
        only_b = sum(1 for x, y in both if x == "FAIL" and y == "PASS")
        found.append(
            Comparison(
                name=name,
                pairs=len(both),
                a_passed=sum(1 for x, _ in both if x == "PASS"),
                b_passed=sum(1 for _, y in both if y == "PASS"),
                test=mcnemar(only_a, only_b),
                unpaired=unpaired[name],
            )
        )
    return found


def comparison_markdown(a: dict[str, Any], b: dict[str, Any], rows: list[Comparison]) -> str:
    judge_a, judge_b = a.get("judge", {}), b.get("judge", {})
    lines = [
        f"# Compare run {a.get('run', {}).get('run_id')} (A) with "
        f"{b.get('run', {}).get('run_id')} (B)",
        "",
    ]
    same = ("model", "digest", "rubric_hash", "options")
    if any(judge_a.get(k) != judge_b.get(k) for k in same):
        lines += [
            "**The judges differ** (model, digest, rubric or options): a difference may "
            "come from the judge, not from the answers.",
            "",
        ]
    lines += [
        "| criterion | pairs | A pass | B pass | A only (b) | B only (c) | p exact | mid-p "
        "| unpaired |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        rate_a = pct(row.a_passed / row.pairs) if row.pairs else "—"
        rate_b = pct(row.b_passed / row.pairs) if row.pairs else "—"
        lines.append(
            f"| {row.name} | {row.pairs} | {rate_a} | {rate_b} | {row.test.b} | {row.test.c} "
            f"| {row.test.p_exact:.3f} | {row.test.p_mid:.3f} | {row.unpaired} |"
        )
    return "\n".join(lines) + "\n"

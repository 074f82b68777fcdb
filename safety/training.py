"""Training the learned layer, and measuring it honestly: leave-one-writer-out.

Build time only: this module imports scikit-learn and numpy (dev dependencies); ``detect`` never
imports it. ``nuisances safety train`` and ``nuisances safety eval --cv`` call it.

Data: the corpora of ``tests/corpus/safety/`` (one file per writer: the writer is the file) and
the team's own lines (``safety/training/``), which are always in the training set and never
held out or scored: they are not a corpus writer.

A model is a multinomial logistic regression (L2, Newton-CG) over ``safety.features``; features seen
in fewer than ``min_df`` training messages are left out. Fitting is deterministic for the same
data and library versions; the weights are written rounded, with sorted keys, so the file is
reproducible byte for byte.

The two thresholds (``threshold`` for the model alone, ``rule_threshold`` for a rule that is
not hard) are chosen on cross-validation: every corpus writer is held out in turn, a model is
trained on the others (and the team's lines), and the held-out verdicts (rules and model
together, as ``detect`` decides) are pooled. The operating point is recall first: among the
pairs whose pooled recall of clear risk lines reaches ``target_recall``, the one with the
fewest false alarms (``choose_thresholds``).

The training module lives beside the detector so that its features are, by construction, the
ones ``detect`` computes: ``featurize`` is the same normalisation, engine and extraction.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from safety.engine import analyse
from safety.evaluation import Report, read_rows, score
from safety.features import CHAR_MAX, CHAR_MIN, FAMILIES, Features, extract
from safety.model import CLASSES, FORMAT, LinearModel, model_from_json
from safety.normalize import normalize
from safety.ruleset import RuleSet, default_ruleset

__all__ = [
    "CrossValidation",
    "Design",
    "Example",
    "Held",
    "Operating",
    "Params",
    "choose_thresholds",
    "cross_validate",
    "dumps",
    "featurize",
    "fit",
    "held_lines",
    "read_corpora",
    "read_examples",
    "train",
]


@dataclass(frozen=True, slots=True)
class Example:
    id: str
    text: str
    expected: str
    tier: str
    writer: str  # the corpus file's stem; "team" for the team's own lines


@dataclass(frozen=True, slots=True)
class Params:
    C: float = 10.0
    min_df: int = 2
    max_iter: int = 200
    tol: float = 1e-5
    edge_in_training: bool = True
    target_recall: float = 0.97
    digits: int = 4


def read_examples(path: Path, writer: str) -> list[Example]:
    """The rows of one JSONL file; ``ValueError`` naming the line when one is malformed."""
    return [
        Example(str(r["id"]), str(r["text"]), str(r["expected"]), str(r["tier"]), writer)
        for r in read_rows(path)
    ]


def featurize(text: str, ruleset: RuleSet) -> Features:
    normalized = normalize(text).text
    return extract(normalized, analyse(ruleset, normalized, float("inf")))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Design:
    """The feature matrix of a list of messages, built once and sliced per fold.

    Columns are every feature name seen, sorted; a fit keeps those present in at least
    ``min_df`` of its own rows.
    """

    def __init__(self, features: Sequence[Features]) -> None:
        import numpy as np
        from scipy.sparse import csr_matrix

        pairs = [list(item.items()) for item in features]
        names = sorted({name for items in pairs for name, _ in items})
        index = {name: i for i, name in enumerate(names)}
        columns = np.fromiter((index[name] for items in pairs for name, _ in items), dtype=np.int64)
        values = np.fromiter((value for items in pairs for _, value in items), dtype=np.float64)
        rows = np.repeat(np.arange(len(pairs)), [len(items) for items in pairs])
        self.names = names
        # Duplicates (an n-gram held by two words) add up, as the model adds them.
        self.matrix = csr_matrix((values, (rows, columns)), shape=(len(features), len(names)))


def fit(
    design: Design,
    rows: Sequence[int],
    labels: Sequence[str],
    params: Params,
    thresholds: tuple[float, float] = (0.5, 0.5),
    training: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Fit one model on ``rows`` of ``design``; return the weights file's content.

    ``thresholds``: (``threshold``, ``rule_threshold``), see ``safety.detect``.
    """
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from threadpoolctl import threadpool_limits

    matrix = design.matrix[np.array(rows)]
    frequency = np.asarray((matrix > 0).sum(axis=0)).ravel()
    kept = np.flatnonzero(frequency >= params.min_df)
    matrix = matrix[:, kept]
    target = np.array([CLASSES.index(label) for label in labels])
    model = LogisticRegression(
        C=params.C, solver="newton-cg", max_iter=params.max_iter, tol=params.tol
    )
    # One BLAS thread: the same sums in the same order, whatever the machine's cores.
    with threadpool_limits(limits=1):
        model.fit(matrix, target)
    if tuple(int(c) for c in model.classes_) != tuple(range(len(CLASSES))):
        raise ValueError("every class needs training examples")
    digits = params.digits
    weights = {}
    for column, coefficients in zip(kept, model.coef_.T, strict=True):
        row = [round(float(v), digits) for v in coefficients]
        if any(row):
            weights[design.names[column]] = row
    return {
        "format": FORMAT,
        "classes": list(CLASSES),
        "features": {"families": dict(FAMILIES), "char_min": CHAR_MIN, "char_max": CHAR_MAX},
        "intercept": [round(float(v), digits) for v in model.intercept_],
        "threshold": thresholds[0],
        "rule_threshold": thresholds[1],
        "training": dict(training or {}),
        "weights": weights,
    }


@dataclass(frozen=True, slots=True)
class Held:
    """One held-out clear line as its fold's model saw it: enough to decide any thresholds."""

    risk_expected: bool
    risk: float
    hard: bool  # a hard rule fired
    soft: bool  # another rule fired

    def card(self, thresholds: tuple[float, float]) -> bool:
        threshold, rule_threshold = thresholds
        return self.hard or (self.soft and self.risk >= rule_threshold) or self.risk >= threshold


@dataclass(frozen=True, slots=True)
class Operating:
    """An operating point on the pooled held-out lines."""

    thresholds: tuple[float, float]
    recall: float
    false_alarms: float


@dataclass(frozen=True, slots=True)
class CrossValidation:
    """Held-out verdicts, writer by writer, and the thresholds they were decided with.

    ``learned_alone`` is the learned layer's own operating point, the rules left out of the
    decision (still features): rules written while reading the corpora have seen every
    held-out writer, so the combined figures are optimistic and this one is not.
    """

    thresholds: tuple[float, float]
    reports: dict[str, Report]  # writer -> the held-out writer's report
    pooled: Report
    learned_alone: Operating


_DESIGN: Design | None = None  # the design the fold workers read (inherited through fork)


def _fit_fold(job: tuple[list[int], list[str], Params]) -> dict[str, Any]:
    if _DESIGN is None:
        raise RuntimeError("a fold was fitted without its design")
    rows, labels, params = job
    return fit(_DESIGN, rows, labels, params)


def _fold_models(
    corpus: Sequence[Example],
    team: Sequence[Example],
    params: Params,
    ruleset: RuleSet,
    progress: Callable[[str], None] | None,
    workers: int,
) -> dict[str, LinearModel]:
    """One model per corpus writer, trained on every other writer and the team's lines."""
    global _DESIGN
    examples = [*corpus, *team]
    _DESIGN = Design([featurize(e.text, ruleset) for e in examples])
    writers = sorted({e.writer for e in corpus})
    jobs = []
    for writer in writers:
        rows = [
            i
            for i, e in enumerate(examples)
            if e.writer != writer and (params.edge_in_training or e.tier == "clear")
        ]
        jobs.append((rows, [examples[i].expected for i in rows], params))
    try:
        # Folds are independent and each fit is deterministic: running them in parallel
        # changes nothing but the time.
        if workers > 1:
            with multiprocessing.get_context("fork").Pool(workers) as pool:
                contents = list(pool.imap(_fit_fold, jobs))
        else:
            contents = []
            for writer, job in zip(writers, jobs, strict=True):
                contents.append(_fit_fold(job))
                if progress is not None:
                    progress(writer)
    finally:
        _DESIGN = None
    return {
        writer: model_from_json(content, f"fold without {writer}")
        for writer, content in zip(writers, contents, strict=True)
    }


def held_lines(
    corpus: Sequence[Example], models: Mapping[str, LinearModel], ruleset: RuleSet
) -> list[Held]:
    """Each clear line of ``corpus`` as the model of its writer sees it (``Held.card`` then
    decides as ``safety.detect.decide`` does, for any thresholds)."""
    held = []
    for example in corpus:
        if example.tier != "clear":
            continue
        normalized = normalize(example.text).text
        analysis = analyse(ruleset, normalized, float("inf"))
        features = extract(normalized, analysis)
        held.append(
            Held(
                risk_expected=example.expected != "rien",
                risk=models[example.writer].predict(features, top=0).risk,
                hard=any(f.rule.hard for f in analysis.firings),
                soft=any(not f.rule.hard for f in analysis.firings),
            )
        )
    return held


def _operating(held: Sequence[Held], thresholds: tuple[float, float]) -> Operating:
    risky = [h for h in held if h.risk_expected]
    calm = [h for h in held if not h.risk_expected]
    return Operating(
        thresholds,
        recall=sum(h.card(thresholds) for h in risky) / max(1, len(risky)),
        false_alarms=sum(h.card(thresholds) for h in calm) / max(1, len(calm)),
    )


def choose_thresholds(held: Sequence[Held], target_recall: float) -> tuple[float, float]:
    """Recall first: the pair (threshold, rule_threshold), on a grid of hundredths, reaching
    ``target_recall`` pooled recall with the fewest false alarms; ties go to the higher
    thresholds. When no pair reaches the target, the pair with the highest recall (then the
    fewest alarms)."""
    import numpy as np

    risk = np.array([h.risk for h in held])
    hard = np.array([h.hard for h in held])
    soft = np.array([h.soft for h in held])
    risky = np.array([h.risk_expected for h in held])
    grid = np.round(np.arange(1, 100) / 100, 2)
    # by_rule[i, j]: line i shows a card through a rule at rule_threshold grid[j].
    by_rule = hard[:, None] | (soft[:, None] & (risk[:, None] >= grid[None, :]))
    by_model = risk[:, None] >= grid[None, :]
    best: tuple[float, int, float, float] | None = None
    for t, threshold in enumerate(grid):
        cards = by_rule[:, : t + 1] | by_model[:, t : t + 1]  # rule_threshold <= threshold
        recall = cards[risky].sum(axis=0) / max(1, int(risky.sum()))
        alarms = cards[~risky].sum(axis=0)
        for r in range(t + 1):
            key = (
                min(float(recall[r]), target_recall),
                -int(alarms[r]),
                float(threshold),
                float(grid[r]),
            )
            if best is None or key > best:
                best = key
    if best is None:
        raise ValueError("no line to choose the thresholds on")
    return best[2], best[3]


def _with_thresholds(model: LinearModel, thresholds: tuple[float, float]) -> LinearModel:
    return LinearModel(
        model.classes, model.intercept, model.weights, thresholds[0], thresholds[1], model.source
    )


def cross_validate(
    corpus: Sequence[Example],
    team: Sequence[Example],
    params: Params,
    ruleset: RuleSet | None = None,
    thresholds: tuple[float, float] | None = None,
    progress: Callable[[str], None] | None = None,
    workers: int = 1,
) -> CrossValidation:
    """Leave each corpus writer out in turn. ``thresholds`` None: choose them on the pooled
    held-out verdicts (``choose_thresholds``), as ``train`` does."""
    rules = ruleset if ruleset is not None else default_ruleset()
    models = _fold_models(corpus, team, params, rules, progress, workers)
    held = held_lines(corpus, models, rules)
    if thresholds is None:
        thresholds = choose_thresholds(held, params.target_recall)
    alone = [Held(h.risk_expected, h.risk, hard=False, soft=False) for h in held]
    alone_threshold = choose_thresholds(alone, params.target_recall)[0]
    reports = {
        writer: score(
            _rows(e for e in corpus if e.writer == writer),
            ruleset=rules,
            model=_with_thresholds(model, thresholds),
        )
        for writer, model in models.items()
    }
    pooled = Report.of(tuple(o for r in reports.values() for o in r.outcomes))
    learned = _operating(alone, (alone_threshold, 1.0))
    return CrossValidation(thresholds, reports, pooled, learned)


def _rows(examples: Iterable[Example]) -> list[dict[str, str]]:
    return [{"id": e.id, "text": e.text, "expected": e.expected, "tier": e.tier} for e in examples]


def read_corpora(corpus_dir: Path, team_dir: Path | None) -> tuple[list[Example], list[Example]]:
    """The corpus writers (one file each) and the team's lines."""
    corpus_files = sorted(corpus_dir.glob("*.jsonl"))
    if not corpus_files:
        raise ValueError(f"{corpus_dir}: no corpus files (*.jsonl)")
    team_files = sorted(team_dir.glob("*.jsonl")) if team_dir is not None else []
    corpus = [e for f in corpus_files for e in read_examples(f, f.stem)]
    team = [e for f in team_files for e in read_examples(f, "team")]
    return corpus, team


def train(
    corpus_dir: Path,
    team_dir: Path | None,
    params: Params,
    ruleset: RuleSet | None = None,
    progress: Callable[[str], None] | None = None,
    workers: int = 1,
) -> tuple[dict[str, Any], CrossValidation]:
    """Choose the thresholds on cross-validation, then fit on everything.

    Returns the weights file's content and the cross-validation it was decided on.
    """
    rules = ruleset if ruleset is not None else default_ruleset()
    corpus, team = read_corpora(corpus_dir, team_dir)
    validation = cross_validate(corpus, team, params, rules, progress=progress, workers=workers)
    chosen = [e for e in (*corpus, *team) if params.edge_in_training or e.tier == "clear"]
    files = sorted(corpus_dir.glob("*.jsonl"))
    team_files = sorted(team_dir.glob("*.jsonl")) if team_dir is not None else []
    training = {
        "corpus": {f.name: _sha256(f) for f in files},
        "team": {f.name: _sha256(f) for f in team_files},
        "lines": len(chosen),
        "params": {
            "C": params.C,
            "min_df": params.min_df,
            "max_iter": params.max_iter,
            "tol": params.tol,
            "edge_in_training": params.edge_in_training,
            "target_recall": params.target_recall,
        },
        "cross_validation": {
            "recall": round(validation.pooled.card_recall_all, 4),
            "category_accuracy": round(validation.pooled.category_accuracy, 4),
            "false_alarms": round(validation.pooled.false_alarm_rate, 4),
        },
    }
    content = fit(
        Design([featurize(e.text, rules) for e in chosen]),
        range(len(chosen)),
        [e.expected for e in chosen],
        params,
        thresholds=validation.thresholds,
        training=training,
    )
    return content, validation


def dumps(content: Mapping[str, Any]) -> str:
    """The weights file's text: sorted keys, one feature per line, a final newline."""
    head = {k: v for k, v in content.items() if k != "weights"}
    lines = ["{"]
    for key in sorted(head):
        lines.append(f"  {json.dumps(key)}: {json.dumps(head[key], sort_keys=True)},")
    lines.append('  "weights": {')
    weights = content["weights"]
    names = sorted(weights)
    for position, name in enumerate(names):
        comma = "," if position < len(names) - 1 else ""
        lines.append(
            f"    {json.dumps(name, ensure_ascii=False)}: {json.dumps(weights[name])}{comma}"
        )
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"

"""Journal and cache: resume call by call after a crash, retry only errors, independent repeats.

The judge is the fake Ollama; what it was asked is counted on its side (``requests``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.evaluation import JudgeRun, judge_run
from bench.identity import ModelIdentity
from bench.journal import Journal, JournalEntry, cache_key
from bench.judge import JudgeConfig
from llm.config import Budgets
from tests.bench.helpers import JUDGE_MODEL, make_run, three_scenarios, verdicts_json
from tests.fakes import Behaviour, FakeOllama

pytestmark = pytest.mark.anyio
FAST = Budgets(connect_s=1, first_token_s=2, idle_s=1, total_s=4, retries=0)


class Crash(Exception):
    pass


@pytest.fixture
def judge() -> Iterator[FakeOllama]:
    with FakeOllama(
        models=[JUDGE_MODEL], loaded=True, default=Behaviour.normal(verdicts_json())
    ) as fake:
        yield fake


def job(url: str, **overrides: Any) -> JudgeRun:
    values: dict[str, Any] = {
        "config": JudgeConfig(model=JUDGE_MODEL, base_url=url),
        "initial_budgets": FAST,
        "coverage_gate": 0.5,
    }
    values.update(overrides)
    return JudgeRun(**values)


def chat_requests(fake: FakeOllama) -> int:
    return sum(1 for body in fake.requests if body.get("messages"))


# -- cache keys ---------------------------------------------------------------------------------

JUDGE = ModelIdentity("ollama", "http://127.0.0.1:11434", "juge:7b", "sha256:aaa")
KEY: dict[str, Any] = {
    "judge": JUDGE, "rubric_hash": "r1", "answer_hash": "a1",
    "options": {"temperature": 0.0, "seed": 7}, "repeat": 0,
}  # fmt: skip


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"repeat": 1}, "repeats stay independent"),
        ({"judge": ModelIdentity("ollama", JUDGE.base_url, "juge:13b", JUDGE.digest)}, "model"),
        ({"judge": ModelIdentity("ollama", JUDGE.base_url, JUDGE.model, "sha256:bbb")}, "digest"),
        ({"rubric_hash": "r2"}, "rubric"),
        ({"answer_hash": "a2"}, "answer"),
        ({"options": {"temperature": 0.0, "seed": 8}}, "seed"),
        ({"options": {"temperature": 0.2, "seed": 7}}, "temperature"),
    ],
)
def test_cache_keys_differ(change: dict[str, Any], why: str) -> None:
    assert cache_key(**{**KEY, **change}) != cache_key(**KEY), why


def test_cache_keys_are_equal_for_identical_inputs() -> None:
    same_url_elsewhere = ModelIdentity("ollama", "http://10.0.0.2:11434", "juge:7b", "sha256:aaa")
    assert cache_key(**KEY) == cache_key(**dict(KEY))
    assert cache_key(**{**KEY, "judge": same_url_elsewhere}) == cache_key(**KEY)  # same weights


# -- resume -------------------------------------------------------------------------------------


@pytest.mark.parametrize("parallel", [1, 3])
async def test_a_crashed_run_resumes_call_by_call(
    tmp_path: Path, judge: FakeOllama, parallel: int
) -> None:
    judge.enqueue(*[Behaviour.normal(verdicts_json(), delay=0.01)] * 12)
    run = make_run(tmp_path / "run", three_scenarios(), repeat=2)  # 6 answers, 6 calls
    config = JudgeConfig(model=JUDGE_MODEL, base_url=judge.url, parallel=parallel)
    seen: list[JournalEntry] = []

    def crash_after_two(entry: JournalEntry) -> None:
        seen.append(entry)
        if len(seen) == 2:
            raise Crash

    with pytest.raises(Crash):
        await judge_run(run.path, job(judge.url, config=config), on_call=crash_after_two)
    journaled = len(Journal(run.path / "judge" / "journal.jsonl").entries())
    assert journaled >= 2
    before = chat_requests(judge)
    summary = await judge_run(run.path, job(judge.url, config=config))
    assert chat_requests(judge) - before == 6 - journaled  # only what was not journaled
    assert summary.counts == {"PASS": 12}
    assert summary.coverage == 1.0
    if parallel == 1:
        assert before == 2  # one at a time: the crash stopped everything after the second call


async def test_a_line_cut_by_a_crash_is_asked_again(tmp_path: Path, judge: FakeOllama) -> None:
    run = make_run(tmp_path / "run", three_scenarios())
    await judge_run(run.path, job(judge.url))
    journal = run.path / "judge" / "journal.jsonl"
    text = journal.read_text(encoding="utf-8")
    journal.write_text(text[: len(text) - 40], encoding="utf-8")  # the last write was cut
    before = chat_requests(judge)
    summary = await judge_run(run.path, job(judge.url))
    assert chat_requests(judge) == before + 1
    assert summary.counts == {"PASS": 6}
    reread = Journal(journal)
    assert (len(reread.entries()), reread.skipped) == (3, 1)  # the cut line stays, skipped


async def test_only_errors_are_retried_and_only_when_asked(
    tmp_path: Path, judge: FakeOllama
) -> None:
    run = make_run(tmp_path / "run", three_scenarios())
    judge.enqueue(
        Behaviour.normal(verdicts_json(verdict="FAIL")),
        Behaviour.normal("pas du JSON"),
        Behaviour.slow_first_byte(5.0),
    )
    first = await judge_run(run.path, job(judge.url))
    assert first.counts == {"FAIL": 2, "ERROR": 4}
    assert first.error_kinds == {"parse": 2, "timeout": 2}
    calls = chat_requests(judge)
    again = await judge_run(run.path, job(judge.url))  # a plain rerun keeps the errors
    assert chat_requests(judge) == calls
    assert again.counts == first.counts
    retried = await judge_run(run.path, job(judge.url, retry_errors=1))
    assert chat_requests(judge) == calls + 2  # the two errors, not the FAIL
    assert retried.counts == {"FAIL": 2, "PASS": 4}
    entries = Journal(run.path / "judge" / "journal.jsonl")
    timed_out = next(e for e in entries.entries() if e.scenario_id == "perceuse")
    assert timed_out.attempt == 2
    assert timed_out.budgets["first_token_s"] == FAST.first_token_s  # generous after a timeout


async def test_repeats_of_one_answer_are_graded_independently(
    tmp_path: Path, judge: FakeOllama
) -> None:
    run = make_run(tmp_path / "run", three_scenarios()[:1], repeat=3)  # three identical answers
    summary = await judge_run(run.path, job(judge.url))
    assert chat_requests(judge) == 3
    assert summary.counts == {"PASS": 6}


async def test_the_shared_cache_spares_calls_across_runs(tmp_path: Path, judge: FakeOllama) -> None:
    cache = tmp_path / "verdicts.jsonl"
    first = make_run(tmp_path / "a", three_scenarios())
    await judge_run(first.path, job(judge.url, cache_path=cache))
    calls = chat_requests(judge)
    texts = {"perceuse": "Une autre réponse, plus longue que quarante caractères au moins."}
    second = make_run(tmp_path / "b", three_scenarios(), texts=texts)
    await judge_run(second.path, job(judge.url, cache_path=cache))
    assert chat_requests(judge) == calls + 1  # only the answer that changed
    entries = Journal(second.path / "judge" / "journal.jsonl").entries()
    assert sorted(e.cached_from or "call" for e in entries) == ["cache", "cache", "call"]


async def test_another_judge_model_is_not_served_from_the_cache(tmp_path: Path) -> None:
    with FakeOllama(models=[JUDGE_MODEL, "autre-juge:3b"], loaded=True,
                    default=Behaviour.normal(verdicts_json())) as fake:  # fmt: skip
        run = make_run(tmp_path / "run", three_scenarios())
        cache = tmp_path / "verdicts.jsonl"
        await judge_run(run.path, job(fake.url, cache_path=cache))
        other = JudgeConfig(model="autre-juge:3b", base_url=fake.url)
        await judge_run(run.path, job(fake.url, config=other, cache_path=cache))
        assert chat_requests(fake) == 6

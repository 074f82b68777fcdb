"""Every way the judge fails gives ERROR with its kind and cause, never FAIL (fake Ollama).

One row per failure mode of the judge server or of its output. The outcome table is the one
``bench.judge`` documents: timeouts → ``timeout``; refused port, HTTP errors, dropped or broken
streams → ``transport``; empty, not JSON, cut, schema-violating output or a degenerate loop →
``parse``. The last rows prove that a valid answer is the only way to get PASS or FAIL.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from bench.grader import GradeItem, outcomes_for
from bench.journal import JournalEntry
from bench.judge import JudgeCall, JudgeConfig, call_judge
from bench.rubric import Case, build_messages
from llm.config import Budgets
from llm.providers import build_provider
from tests.bench.helpers import CRITERIA, GOOD_TEXT, JUDGE_MODEL, scenario, verdicts_json
from tests.fakes import Behaviour, FakeOllama, unused_port_url

pytestmark = pytest.mark.anyio
BUDGETS = Budgets(
    connect_s=1.0, first_token_s=0.6, idle_s=0.4, total_s=1.5, num_predict=400,
    loop_repeats=12, retries=0,
)  # fmt: skip
VALID = verdicts_json()
CASE = Case(scenario(), (), "Mon voisin fait du bruit la nuit.", GOOD_TEXT, "rien", ())


@pytest.fixture(scope="module")
def judge() -> Iterator[FakeOllama]:
    with FakeOllama(models=[JUDGE_MODEL], loaded=True) as fake:
        yield fake


async def ask(url: str, budgets: Budgets = BUDGETS, num_predict: int = 400) -> JudgeCall:
    config = JudgeConfig(model=JUDGE_MODEL, base_url=url, num_predict=num_predict)
    provider = build_provider(config.provider_config(), budgets)
    try:
        messages = build_messages(CASE, {})
        return await call_judge(provider, messages, CRITERIA, config.options(CRITERIA), budgets)
    finally:
        await provider.aclose()


def as_outcomes(call: JudgeCall) -> list[str]:
    """The criteria's outcomes once the call is journaled (as the grader records them)."""
    item = GradeItem("scenario", "x#r0", scenario(), 0, CASE, "k")
    entry = JournalEntry(
        key="k", item="x#r0", kind="scenario", scenario_id="x", repeat=0, at="now",
        judge_type="ollama", judge_url="u", judge_model=JUDGE_MODEL, judge_digest=None,
        rubric_hash="r", answer_hash="a", options={},
        outcome="verdicts" if call.verdicts is not None else "error", verdicts=call.verdicts,
        error_kind=call.error_kind, cause=call.cause, raw=call.raw,
        done_reason=call.done_reason, timings={}, budgets={}, attempt=1,
    )  # fmt: skip
    return [o.outcome for o in outcomes_for(item, entry)]


ONE_MISSING = json.dumps({"repond_a_la_question": {"raison": "ok", "verdict": "PASS"}})
EXTRA_KEY = json.dumps({**json.loads(VALID), "ton": {"raison": "ok", "verdict": "PASS"}})
LOWERCASE = VALID.replace('"PASS"', '"pass"')
UNKNOWN_VERDICT = VALID.replace('"PASS"', '"PEUT-ÊTRE"', 1)
NO_REASON = json.dumps({c: {"verdict": "FAIL"} for c in CRITERIA})
BOOLEAN = json.dumps({c: {"raison": "ok", "verdict": True} for c in CRITERIA})
DUPLICATE = VALID[:-1] + ', "etapes_concretes": {"raison": "x", "verdict": "FAIL"}}'
FENCED = f"```json\n{VALID}\n```"


@pytest.mark.parametrize(
    ("behaviour", "kind", "cause"),
    [
        # timeouts: the judge is slow, not the answer bad
        (Behaviour.slow_first_byte(3.0, text=VALID), "timeout", "timeout.first_token"),
        (Behaviour.stall(after_chunks=3, seconds=3.0, text=VALID), "timeout", "timeout.idle"),
        (
            Behaviour(text=VALID, chunk_size=1, delay=0.1),
            "timeout",
            "timeout.total",
        ),  # ~17 s of JSON
        # transport: the server failed
        (Behaviour.busy(), "transport", "Busy (HTTP 503)"),
        (Behaviour.server_error(), "transport", "ServerError (HTTP 500)"),
        (Behaviour.not_found(), "transport", "ModelNotFound (HTTP 404)"),
        (Behaviour.drop(after_chunks=3, text=VALID), "transport", "IncompleteStream"),
        (Behaviour.error_line(after_chunks=3, text=VALID), "transport", "StreamError"),
        (Behaviour.malformed(after_chunks=2, text=VALID), "transport", "MalformedLine"),
        # parse: the server answered, the text is no verdict
        (Behaviour.normal("Je pense que la réponse est bonne."), "parse", "not JSON"),
        (Behaviour.normal(""), "parse", "empty output"),
        (Behaviour.normal(FENCED), "parse", "not JSON"),  # no lenient fence stripping
        (Behaviour.normal("[1, 2]"), "parse", "not a JSON object"),
        (Behaviour.normal(ONE_MISSING), "parse", "etapes_concretes: Field required"),
        (Behaviour.normal(EXTRA_KEY), "parse", "ton: Extra inputs are not permitted"),
        (Behaviour.normal(LOWERCASE), "parse", "verdict: Input should be 'PASS' or 'FAIL'"),
        (Behaviour.normal(UNKNOWN_VERDICT), "parse", "verdict: Input should be 'PASS' or 'FAIL'"),
        (Behaviour.normal(NO_REASON), "parse", "raison: Field required"),  # no defaults
        (Behaviour.normal(BOOLEAN), "parse", "verdict: Input should be 'PASS' or 'FAIL'"),
        (Behaviour.normal(DUPLICATE), "parse", "duplicate keys: etapes_concretes"),
        (Behaviour.endless(chunk='{"a', delay=0.01), "parse", "degenerate output"),  # loop guard
    ],
)
async def test_a_failing_judge_is_an_error_with_its_cause(
    judge: FakeOllama, behaviour: Behaviour, kind: str, cause: str
) -> None:
    judge.enqueue(behaviour)
    call = await ask(judge.url)
    assert (call.error_kind, call.verdicts) == (kind, None)
    assert call.cause is not None
    assert cause in call.cause
    assert as_outcomes(call) == ["ERROR", "ERROR"]  # never FAIL, never dropped


async def test_a_refused_port_is_a_transport_error() -> None:
    call = await ask(unused_port_url())
    assert call.error_kind == "transport"
    assert call.cause is not None
    assert "ConnectionRefused" in call.cause
    assert as_outcomes(call) == ["ERROR", "ERROR"]


async def test_output_cut_at_num_predict_says_so(judge: FakeOllama) -> None:
    judge.enqueue(Behaviour.normal(VALID, chunk_size=4))
    call = await ask(judge.url, num_predict=20)  # the fake cuts after 20 pieces ("length")
    assert call.error_kind == "parse"
    assert call.done_reason == "length"
    assert call.cause is not None
    assert "cut at num_predict" in call.cause
    assert call.raw == VALID[:80]  # the raw text is kept, whatever happened


@pytest.mark.parametrize("verdict", ["PASS", "FAIL"])
async def test_only_a_valid_answer_gives_verdicts(judge: FakeOllama, verdict: str) -> None:
    judge.enqueue(Behaviour.normal(verdicts_json(verdict=verdict), chunk_size=7))
    call = await ask(judge.url)
    assert call.error_kind is None
    assert as_outcomes(call) == [verdict, verdict]
    assert call.raw == verdicts_json(verdict=verdict)
    assert call.timings.first_token_s is not None


async def test_the_request_is_constrained_deterministic_and_seeded(judge: FakeOllama) -> None:
    judge.enqueue(Behaviour.normal(VALID))
    await ask(judge.url)
    sent = judge.requests[-1]
    assert sent["model"] == JUDGE_MODEL
    assert sent["options"]["temperature"] == 0.0
    assert sent["options"]["seed"] == 7
    assert sent["keep_alive"] == "5m"  # the judge leaves memory soon after the phase
    schema = sent["format"]
    assert schema["required"] == list(CRITERIA)
    assert schema["additionalProperties"] is False
    verdict = schema["properties"]["etapes_concretes"]["properties"]["verdict"]
    assert verdict["enum"] == ["PASS", "FAIL"]
    assert sent["messages"][0]["role"] == "system"
    assert "<reponse>" in sent["messages"][1]["content"]

"""The fake Ollama server, driven over real HTTP with plain httpx (sync and async)."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.fakes import (
    BUSY_MESSAGE,
    DEFAULT_MODEL,
    Behaviour,
    FakeOllama,
    unused_port_url,
)
from tests.fakes.ollama_wire import OVERHEAD_NS

TEXT = "Bonjour, notez les dates. [[conciliateur]]"
USER = [{"role": "user", "content": "Mon voisin fait du bruit toutes les nuits."}]
CHAT = {"model": DEFAULT_MODEL, "messages": USER}
GO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$")
METRICS = (
    "total_duration",
    "load_duration",
    "prompt_eval_count",
    "prompt_eval_duration",
    "eval_count",
    "eval_duration",
)
#: Generous guard so that a broken fake fails a test instead of hanging the run.
TIMEOUT = httpx.Timeout(5.0)


@pytest.fixture
def fake() -> Iterator[FakeOllama]:
    with FakeOllama(models=[DEFAULT_MODEL], loaded=True) as server:
        yield server


@pytest.fixture
def client(fake: FakeOllama) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=fake.url, timeout=TIMEOUT) as http:
        yield http


def stream_lines(client: httpx.Client, body: dict[str, Any]) -> tuple[httpx.Response, list[str]]:
    """POST /api/chat and collect the raw NDJSON lines of a complete answer."""
    with client.stream("POST", "/api/chat", json=body) as response:
        return response, list(response.iter_lines())


def read_into(client: httpx.Client, body: dict[str, Any], received: list[str]) -> None:
    """POST /api/chat and keep every line read before an error interrupts the stream."""
    with client.stream("POST", "/api/chat", json=body) as response:
        assert response.status_code == 200
        received.extend(response.iter_lines())


# -- normal streams ---------------------------------------------------------------------------


def test_normal_streams_chunks_then_a_final_line_with_metrics(
    fake: FakeOllama, client: httpx.Client
) -> None:
    fake.enqueue(Behaviour.normal(TEXT, chunk_size=4, delay=0.0))
    response, lines = stream_lines(client, CHAT)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/x-ndjson"
    assert response.headers["transfer-encoding"] == "chunked"
    assert "server" not in response.headers
    parts = [json.loads(line) for line in lines]
    *chunks, final = parts
    assert len(chunks) == -(-len(TEXT) // 4)
    assert "".join(part["message"]["content"] for part in chunks) == TEXT
    for chunk in chunks:
        assert list(chunk) == ["model", "created_at", "message", "done"]
        assert chunk["model"] == DEFAULT_MODEL
        assert chunk["message"]["role"] == "assistant"
        assert chunk["done"] is False
        assert GO_TIME.match(chunk["created_at"])
    assert list(final) == ["model", "created_at", "message", "done", "done_reason", *METRICS]
    assert final["message"] == {"role": "assistant", "content": ""}
    assert (final["done"], final["done_reason"]) == (True, "stop")
    assert final["eval_count"] == len(chunks)
    assert all(isinstance(final[key], int) and final[key] > 0 for key in METRICS)
    parts_ns = final["load_duration"] + final["prompt_eval_duration"] + final["eval_duration"]
    assert final["total_duration"] == parts_ns + OVERHEAD_NS


def test_stream_false_returns_one_object_with_the_whole_text(
    fake: FakeOllama, client: httpx.Client
) -> None:
    fake.enqueue(Behaviour.normal(TEXT))
    response = client.post("/api/chat", json={**CHAT, "stream": False})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json; charset=utf-8"
    assert "content-length" in response.headers
    body = response.json()
    assert body["message"] == {"role": "assistant", "content": TEXT}
    assert (body["done"], body["done_reason"]) == (True, "stop")
    assert body["eval_count"] == -(-len(TEXT) // 4)


def test_go_escapes_html_characters_like_encoding_json(
    fake: FakeOllama, client: httpx.Client
) -> None:
    fake.enqueue(Behaviour.normal("<b>&</b> été", chunk_size=100))
    _, lines = stream_lines(client, CHAT)
    assert lines[0].count("\\u003c") == 2
    assert "\\u0026" in lines[0]
    assert "été" in lines[0]
    assert json.loads(lines[0])["message"]["content"] == "<b>&</b> été"


def test_num_predict_cuts_the_reply_and_reports_length(
    fake: FakeOllama, client: httpx.Client
) -> None:
    fake.enqueue(Behaviour.normal(TEXT, chunk_size=4))
    _, lines = stream_lines(client, {**CHAT, "options": {"num_predict": 3}})
    *chunks, final = [json.loads(line) for line in lines]
    assert len(chunks) == 3
    assert (final["done_reason"], final["eval_count"]) == ("length", 3)


def test_length_behaviour_reports_length(fake: FakeOllama, client: httpx.Client) -> None:
    fake.enqueue(Behaviour.length("Tronqu"))
    _, lines = stream_lines(client, CHAT)
    assert json.loads(lines[-1])["done_reason"] == "length"


def test_default_reply_when_the_script_is_empty(fake: FakeOllama, client: httpx.Client) -> None:
    _, lines = stream_lines(client, CHAT)
    assert json.loads(lines[-1])["done"] is True
    assert fake.pending == 0


def test_requests_are_recorded_verbatim(fake: FakeOllama, client: httpx.Client) -> None:
    body = {
        **CHAT,
        "stream": False,
        "options": {"num_predict": 400, "temperature": 0.2},
        "keep_alive": "30m",
        "format": "json",
        "think": False,
    }
    client.post("/api/chat", json=body)
    assert fake.wait_for_requests(1, timeout=5.0)
    assert fake.requests == [body]


def test_connection_is_kept_alive_across_requests(fake: FakeOllama) -> None:
    seen: list[str] = []
    with httpx.Client(base_url=fake.url, timeout=TIMEOUT) as http:
        for _ in range(3):
            with http.stream("POST", "/api/chat", json=CHAT) as response:
                list(response.iter_lines())
                stream = response.extensions["network_stream"]
                seen.append(repr(stream.get_extra_info("client_addr")))
    assert len(set(seen)) == 1


# -- loads and model listing ------------------------------------------------------------------


def test_empty_messages_load_the_model() -> None:
    with FakeOllama(loaded=False) as fake, httpx.Client(base_url=fake.url, timeout=TIMEOUT) as http:
        assert http.get("/api/ps").json() == {"models": []}
        fake.enqueue(Behaviour.busy())
        response = http.post("/api/chat", json={"model": DEFAULT_MODEL, "messages": []})
        assert response.status_code == 200
        body = response.json()
        assert list(body) == ["model", "created_at", "message", "done", "done_reason"]
        assert (body["done"], body["done_reason"]) == (True, "load")
        assert fake.loaded_models == [DEFAULT_MODEL]
        assert fake.pending == 1, "a load does not consume the script"
        running = http.get("/api/ps").json()["models"]
        assert [model["name"] for model in running] == [DEFAULT_MODEL]
        assert GO_TIME.match(running[0]["expires_at"])
        assert running[0]["size_vram"] == 0


def test_keep_alive_zero_unloads(fake: FakeOllama, client: httpx.Client) -> None:
    body = {"model": DEFAULT_MODEL, "messages": [], "keep_alive": 0}
    assert client.post("/api/chat", json=body).json()["done_reason"] == "unload"
    assert client.get("/api/ps").json() == {"models": []}


def test_cold_model_reports_a_long_load_duration() -> None:
    with FakeOllama(loaded=False) as fake, httpx.Client(base_url=fake.url, timeout=TIMEOUT) as http:
        cold = http.post("/api/chat", json={**CHAT, "stream": False}).json()
        warm = http.post("/api/chat", json={**CHAT, "stream": False}).json()
    assert cold["load_duration"] > 1_000_000_000 > warm["load_duration"]


def test_tags_version_show_and_root(client: httpx.Client) -> None:
    tags = client.get("/api/tags").json()["models"]
    assert [(model["name"], model["model"]) for model in tags] == [(DEFAULT_MODEL, DEFAULT_MODEL)]
    assert set(tags[0]) == {"name", "model", "modified_at", "size", "digest", "details"}
    assert tags[0]["details"]["family"] == "qwen2"
    assert re.fullmatch(r"[0-9a-f]{64}", tags[0]["digest"])
    assert client.get("/api/version").json() == {"version": "0.32.15"}
    show = client.post("/api/show", json={"model": DEFAULT_MODEL}).json()
    assert {"modelfile", "parameters", "template", "details", "model_info", "capabilities"} <= set(
        show
    )
    assert show["model_info"]["general.architecture"] == "qwen2"
    assert "completion" in show["capabilities"]
    assert client.get("/").text == "Ollama is running"


# -- refusals ---------------------------------------------------------------------------------

STATUS_CASES = [
    pytest.param(Behaviour.not_found(), 404, f"model '{DEFAULT_MODEL}' not found", id="404-now"),
    pytest.param(
        Behaviour.not_found("double_quotes"),
        404,
        f'model "{DEFAULT_MODEL}" not found, try pulling it first',
        id="404-scheduler",
    ),
    pytest.param(
        Behaviour.not_found("legacy"),
        404,
        f"model '{DEFAULT_MODEL}' not found, try pulling it first",
        id="404-legacy",
    ),
    pytest.param(Behaviour.busy(), 503, BUSY_MESSAGE, id="503-queue-full"),
    pytest.param(Behaviour.rate_limited("slow down"), 429, "slow down", id="429-cloud-quota"),
    pytest.param(Behaviour.server_error("boom"), 500, "boom", id="500-runner-crash"),
    pytest.param(Behaviour.bad_request("bad"), 400, "bad", id="400-bad-request"),
]


@pytest.mark.parametrize(("behaviour", "status", "message"), STATUS_CASES)
@pytest.mark.parametrize("stream", [True, False])
def test_refusals_answer_status_and_error_body(
    fake: FakeOllama,
    client: httpx.Client,
    behaviour: Behaviour,
    status: int,
    message: str,
    stream: bool,
) -> None:
    fake.enqueue(behaviour)
    response = client.post("/api/chat", json={**CHAT, "stream": stream})
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json; charset=utf-8"
    assert response.json() == {"error": message}


BUSY_BYTES = b'{"error":"server busy, please try again.  maximum pending requests exceeded"}'


def test_busy_body_is_byte_exact(fake: FakeOllama, client: httpx.Client) -> None:
    fake.enqueue(Behaviour.busy())
    assert client.post("/api/chat", json=CHAT).content == BUSY_BYTES


@pytest.mark.parametrize(
    ("path", "body", "status", "error"),
    [
        ("/api/chat", {"model": "nope", "messages": USER}, 404, "model 'nope' not found"),
        ("/api/chat", {"model": "nope", "messages": []}, 404, "model 'nope' not found"),
        ("/api/show", {"model": "nope"}, 404, "model 'nope:latest' not found"),
        ("/api/chat", {"messages": USER}, 400, "model is required"),
        ("/api/show", {}, 400, "model is required"),
        ("/api/chat", {**CHAT, "think": True}, 400, f'"{DEFAULT_MODEL}" does not support thinking'),
        ("/api/chat", {**CHAT, "keep_alive": "soon"}, 400, 'time: invalid duration "soon"'),
    ],
)
def test_protocol_errors(
    fake: FakeOllama, client: httpx.Client, path: str, body: Any, status: int, error: str
) -> None:
    fake.enqueue(Behaviour.normal())
    response = client.post(path, json=body)
    assert (response.status_code, response.json()) == (status, {"error": error})
    assert fake.pending == 1, "a request refused by the protocol does not consume the script"


def test_missing_and_invalid_bodies_are_400(client: httpx.Client) -> None:
    missing = client.post("/api/chat")
    assert (missing.status_code, missing.json()) == (400, {"error": "missing request body"})
    invalid = client.post("/api/chat", content=b"{oops")
    assert invalid.status_code == 400
    assert invalid.json()["error"].startswith("invalid character")


def test_unknown_route_and_wrong_method(client: httpx.Client) -> None:
    missing = client.get("/nope")
    assert (missing.status_code, missing.text) == (404, "404 page not found")
    assert client.get("/api/chat").status_code == 405


def test_thinking_models_accept_think() -> None:
    with (
        FakeOllama(models=["qwen3:0.6b"], thinking=["qwen3:0.6b"]) as fake,
        httpx.Client(base_url=fake.url, timeout=TIMEOUT) as http,
    ):
        body = {"model": "qwen3:0.6b", "messages": USER, "think": True, "stream": False}
        assert http.post("/api/chat", json=body).json()["done"] is True
        assert (
            "thinking"
            in http.post("/api/show", json={"model": "qwen3:0.6b"}).json()["capabilities"]
        )


# -- broken streams ---------------------------------------------------------------------------


def test_error_line_mid_stream_keeps_status_200(fake: FakeOllama, client: httpx.Client) -> None:
    fake.enqueue(Behaviour.error_line(after_chunks=2, message="runner died"))
    response, lines = stream_lines(client, CHAT)
    assert response.status_code == 200
    parts = [json.loads(line) for line in lines]
    assert [part.get("done") for part in parts] == [False, False, None]
    assert lines[-1] == '{"error":"runner died"}'


def test_error_before_any_line_becomes_a_500(fake: FakeOllama, client: httpx.Client) -> None:
    fake.enqueue(Behaviour.error_line(after_chunks=0, message="runner died"))
    response = client.post("/api/chat", json=CHAT)
    assert (response.status_code, response.json()) == (500, {"error": "runner died"})


def test_drop_closes_the_connection_without_done(fake: FakeOllama, client: httpx.Client) -> None:
    fake.enqueue(Behaviour.drop(after_chunks=2))
    received: list[str] = []
    with pytest.raises(httpx.RemoteProtocolError):
        read_into(client, CHAT, received)
    assert len(received) == 2
    assert not any(json.loads(line)["done"] for line in received)


def test_drop_without_stream_sends_no_response(fake: FakeOllama, client: httpx.Client) -> None:
    fake.enqueue(Behaviour.drop(after_chunks=2))
    with pytest.raises(httpx.RemoteProtocolError):
        client.post("/api/chat", json={**CHAT, "stream": False})


def test_malformed_line_is_not_json_and_stream_ends_without_done(
    fake: FakeOllama, client: httpx.Client
) -> None:
    fake.enqueue(Behaviour.malformed(after_chunks=1))
    response, lines = stream_lines(client, CHAT)
    assert response.status_code == 200
    assert len(lines) == 2
    assert json.loads(lines[0])["done"] is False
    with pytest.raises(json.JSONDecodeError):
        json.loads(lines[1])


# -- slow, stalled and endless streams: the client leaving is observed ------------------------


def test_slow_first_byte_trips_a_read_timeout_and_is_seen(fake: FakeOllama) -> None:
    fake.enqueue(Behaviour.slow_first_byte(10.0))
    impatient = httpx.Timeout(5.0, read=0.1)
    with (
        httpx.Client(base_url=fake.url, timeout=impatient) as http,
        pytest.raises(httpx.ReadTimeout),
    ):
        http.post("/api/chat", json=CHAT)
    assert fake.wait_for_disconnect(timeout=5.0)


def test_slow_first_byte_then_a_normal_stream(fake: FakeOllama, client: httpx.Client) -> None:
    fake.enqueue(Behaviour.slow_first_byte(0.05, text="ok"))
    _, lines = stream_lines(client, CHAT)
    assert json.loads(lines[-1])["done"] is True


def test_stall_then_client_gives_up_is_seen(fake: FakeOllama) -> None:
    fake.enqueue(Behaviour.stall(after_chunks=2, seconds=10.0))
    received: list[str] = []
    impatient = httpx.Timeout(5.0, read=0.5)
    with (
        httpx.Client(base_url=fake.url, timeout=impatient) as http,
        pytest.raises(httpx.ReadTimeout),
    ):
        read_into(http, CHAT, received)
    assert len(received) == 2
    assert fake.wait_for_disconnect(timeout=5.0)
    assert fake.disconnects == 1


def test_short_stall_then_the_rest(fake: FakeOllama, client: httpx.Client) -> None:
    fake.enqueue(Behaviour.stall(after_chunks=1, seconds=0.05, text="abcdefgh"))
    _, lines = stream_lines(client, CHAT)
    assert len(lines) == 3
    assert json.loads(lines[-1])["done_reason"] == "stop"
    assert fake.disconnects == 0


def test_endless_stops_when_the_client_leaves(fake: FakeOllama, client: httpx.Client) -> None:
    fake.enqueue(Behaviour.endless(chunk="bla ", delay=0.005))
    with client.stream("POST", "/api/chat", json=CHAT) as response:
        lines = response.iter_lines()
        first = [json.loads(next(lines)) for _ in range(5)]
    assert {part["message"]["content"] for part in first} == {"bla "}
    assert not any(part["done"] for part in first)
    assert fake.wait_for_disconnect(timeout=5.0)
    assert fake.disconnects == 1


def test_close_interrupts_an_endless_stream() -> None:
    fake = FakeOllama()
    fake.enqueue(Behaviour.endless(delay=0.01))
    errors: list[BaseException] = []

    def consume() -> None:
        try:
            with httpx.Client(base_url=fake.url, timeout=TIMEOUT) as http:
                stream_lines(http, CHAT)
        except httpx.HTTPError as exc:
            errors.append(exc)

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    assert fake.wait_for_requests(1, timeout=5.0)
    started = time.monotonic()
    fake.close()
    reader.join(timeout=5.0)
    assert not reader.is_alive()
    assert time.monotonic() - started < 5.0, "guard: close() must not hang"
    assert errors, "the client saw its stream cut"
    assert fake.disconnects == 0, "closing the fake is not a client disconnect"


# -- refused connections and async clients ----------------------------------------------------


def test_unused_port_refuses_connections() -> None:
    with (
        httpx.Client(base_url=unused_port_url(), timeout=TIMEOUT) as http,
        pytest.raises(httpx.ConnectError),
    ):
        http.get("/api/version")


@pytest.mark.anyio
async def test_async_stream_and_disconnect(fake: FakeOllama) -> None:
    fake.enqueue(Behaviour.normal(TEXT, chunk_size=8), Behaviour.endless(delay=0.005))
    async with httpx.AsyncClient(base_url=fake.url, timeout=TIMEOUT) as http:
        async with http.stream("POST", "/api/chat", json=CHAT) as response:
            parts = [json.loads(line) async for line in response.aiter_lines()]
        assert "".join(part["message"]["content"] for part in parts) == TEXT
        async with http.stream("POST", "/api/chat", json=CHAT) as response:
            async for _line in response.aiter_lines():
                break
    assert await fake.wait_for_disconnect_async(within=5.0)

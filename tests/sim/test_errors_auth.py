"""Error bodies and status codes per engine, and which paths each engine's API key guards."""

from __future__ import annotations

import aiohttp
import orjson
import pytest

from console.sim.faults import parse_faults
from tests.sim.conftest import ENGINES, METRICS_PATH, chat, sim


async def _post_raw(s: aiohttp.ClientSession, url: str, data: bytes) -> tuple[int, bytes]:
    async with s.post(f"{url}/v1/chat/completions", data=data, headers={"Content-Type": "application/json"}) as r:
        return r.status, await r.read()


@pytest.mark.parametrize("engine", ENGINES)
async def test_bad_json(engine: str) -> None:
    async with sim(engine) as srv, aiohttp.ClientSession() as s:
        status, body = await _post_raw(s, srv.url, b'{"messages": [')
        assert status == 400
        if engine == "vllm":
            err = orjson.loads(body)["error"]
            assert err["code"] == 400 and err["type"] == "BadRequestError" and "param" in err
        elif engine == "sglang":
            err = orjson.loads(body)
            assert err["object"] == "error" and err["code"] == 400
        elif engine == "trtllm":
            assert isinstance(orjson.loads(body)["error"], str)
        elif engine == "tgi":
            assert body.startswith(b"Failed to parse the request body as JSON")
        else:
            assert orjson.loads(body)["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize("engine", ENGINES)
async def test_unknown_model(engine: str) -> None:
    async with sim(engine, model="served") as srv, aiohttp.ClientSession() as s:
        status, body = await chat(s, srv.url, "hi", stream=False, model="no-such-model", max_tokens=2)
        if engine in ("tgi", "llamacpp"):
            assert status == 200  # these engines ignore the model field
            assert body["model"] == "served"
        else:
            assert status == 404
            msg = orjson.loads(body)
            msg = msg.get("error", msg)
            assert "no-such-model" in msg["message"] and msg["code"] == 404


async def test_trtllm_rejects_unknown_fields_others_accept() -> None:
    async with aiohttp.ClientSession() as s:
        async with sim("trtllm") as srv:
            status, body = await chat(s, srv.url, "hi", stream=False, max_tokens=2, bogus_field=1)
            assert status == 400
            assert "bogus_field" in orjson.loads(body)["error"]
            status, _ = await chat(s, srv.url, "hi", stream=False, max_tokens=2, ignore_eos=True, top_k=5)
            assert status == 200
        async with sim("vllm") as srv:
            status, _ = await chat(s, srv.url, "hi", stream=False, max_tokens=2, bogus_field=1)
            assert status == 200


@pytest.mark.parametrize("engine", ENGINES)
async def test_error_rate_fault_uses_engine_error_shape(engine: str) -> None:
    async with sim(engine, faults=parse_faults(["error-rate=1.0"])) as srv, aiohttp.ClientSession() as s:
        status, body = await chat(s, srv.url, "hi", stream=True, max_tokens=2)
        assert status == 500
        obj = orjson.loads(body)
        if engine == "vllm" or engine == "llamacpp":
            assert obj["error"]["code"] == 500
        elif engine in ("sglang", "trtllm"):
            assert obj["object"] == "error" and obj["code"] == 500
        else:
            assert obj["error_type"] == "incomplete_generation"
        async with s.get(f"{srv.url}/_sim/state") as r:
            assert (await r.json())["counters"]["requests_failed"] == 1


# Which paths need the key, per engine (engines/*.toml say where each rule comes from).
GUARDED = {
    "vllm": {"/v1/models": True, "/v1/chat/completions": True, "/metrics": False, "/health": False,
             "/version": False},
    "sglang": {"/v1/models": True, "/v1/chat/completions": True, "/metrics": False, "/health": False,
               "/get_server_info": True},
    "tgi": {"/v1/models": False, "/v1/chat/completions": True, "/metrics": False, "/health": False, "/info": False},
    "llamacpp": {"/v1/models": True, "/models": True, "/v1/chat/completions": True, "/metrics": True,
                 "/props": True, "/slots": True, "/health": False, "/v1/health": False},
}


async def _call(s: aiohttp.ClientSession, url: str, path: str, headers: dict[str, str]) -> tuple[int, bytes]:
    if path.endswith("completions"):
        payload = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
        async with s.post(url + path, json=payload, headers=headers) as r:
            return r.status, await r.read()
    async with s.get(url + path, headers=headers) as r:
        return r.status, await r.read()


@pytest.mark.parametrize("engine", list(GUARDED))
async def test_api_key_matrix(engine: str) -> None:
    key = "sekret-123"
    async with sim(engine, api_key=key) as srv, aiohttp.ClientSession() as s:
        for path, guarded in GUARDED[engine].items():
            no_status, no_body = await _call(s, srv.url, path, {})
            wrong_status, _ = await _call(s, srv.url, path, {"Authorization": "Bearer nope"})
            ok_status, _ = await _call(s, srv.url, path, {"Authorization": f"Bearer {key}"})
            assert ok_status == 200, (path, ok_status)
            if not guarded:
                assert (no_status, wrong_status) == (200, 200), path
                continue
            assert (no_status, wrong_status) == (401, 401), path
            if engine in ("vllm", "sglang"):
                assert orjson.loads(no_body) == {"error": "Unauthorized"}
            elif engine == "tgi":
                assert no_body == b""
            else:
                assert orjson.loads(no_body) == {
                    "error": {"message": "Invalid API Key", "type": "authentication_error", "code": 401}}
        if engine == "llamacpp":
            status, _ = await _call(s, srv.url, "/metrics", {"X-Api-Key": key})
            assert status == 200
        if engine == "tgi":  # TGI compares case-insensitively
            status, _ = await _call(s, srv.url, "/v1/chat/completions", {"Authorization": f"bearer {key.upper()}"})
            assert status == 200


async def test_trtllm_ignores_authorization_entirely() -> None:
    async with sim("trtllm") as srv, aiohttp.ClientSession() as s:
        for path in ("/v1/models", "/v1/chat/completions", METRICS_PATH["trtllm"]):
            status, _ = await _call(s, srv.url, path, {"Authorization": "Bearer whatever"})
            assert status == 200


@pytest.mark.parametrize("engine", ENGINES)
async def test_prompt_longer_than_the_context(engine: str) -> None:
    async with sim(engine) as srv, aiohttp.ClientSession() as s:
        status, body = await chat(s, srv.url, "word " * 9000, stream=False, max_tokens=2)
        assert status == (422 if engine == "tgi" else 400)
        obj = orjson.loads(body)
        if engine == "llamacpp":
            assert obj["error"]["type"] == "exceed_context_size_error"
        elif engine == "tgi":
            assert obj["error_type"] == "validation"
        else:
            msg = obj["error"]["message"] if "error" in obj and isinstance(obj["error"], dict) else obj["message"]
            assert "maximum context length" in msg


@pytest.mark.parametrize("engine", ENGINES)
async def test_missing_messages_and_bad_max_tokens(engine: str) -> None:
    async with sim(engine) as srv, aiohttp.ClientSession() as s:
        async with s.post(f"{srv.url}/v1/chat/completions", json={"max_tokens": 3}) as r:
            assert r.status == (422 if engine == "tgi" else 400)
            if engine == "tgi":
                assert (await r.text()).startswith("Failed to deserialize the JSON body")
        status, body = await chat(s, srv.url, "hi", stream=False, max_tokens=0)
        assert status == (422 if engine == "tgi" else 400)
        if engine == "tgi":
            assert orjson.loads(body)["error_type"] == "validation"

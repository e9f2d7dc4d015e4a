"""OpenAI-compatible API of each flavour: models, identity, health, SSE framing, usage, lengths."""

from __future__ import annotations

import aiohttp
import pytest

from tests.sim.conftest import ENGINES, chat, read_sse, sim, sse_json


async def test_models_and_identity_shapes() -> None:
    async with aiohttp.ClientSession() as s:
        async with sim("vllm", model="m-v") as v:
            models = await (await s.get(f"{v.url}/v1/models")).json()
            card = models["data"][0]
            assert models["object"] == "list"
            assert (card["id"], card["root"], card["owned_by"]) == ("m-v", "m-v", "vllm")
            assert card["max_model_len"] > 0
            assert await (await s.get(f"{v.url}/version")).json() == {"version": "0.34.0"}
        async with sim("vllm", metrics_version="legacy") as v:
            assert (await (await s.get(f"{v.url}/version")).json())["version"] == "0.9.1"
        async with sim("sglang", model="m-s") as g:
            info = await (await s.get(f"{g.url}/get_server_info")).json()
            assert info["version"] and info["served_model_name"] == "m-s"
            assert (await (await s.get(f"{g.url}/v1/models")).json())["data"][0]["id"] == "m-s"
        async with sim("trtllm", model="m-t") as t:
            card = (await (await s.get(f"{t.url}/v1/models")).json())["data"][0]
            assert (card["id"], card["owned_by"]) == ("m-t", "tensorrt_llm")
            assert (await (await s.get(f"{t.url}/version")).json())["version"].startswith("1.")
        async with sim("tgi", model="org/m-g") as g:
            card = (await (await s.get(f"{g.url}/v1/models")).json())["data"][0]
            assert (card["id"], card["owned_by"], card["created"]) == ("org/m-g", "org/m-g", 0)
            info = await (await s.get(f"{g.url}/info")).json()
            assert info["model_id"] == "org/m-g" and info["version"] == "3.3.7"
            assert info["max_total_tokens"] > info["max_input_tokens"] > 0
        async with sim("llamacpp", model="alias-l", max_running=3) as ll:
            models = await (await s.get(f"{ll.url}/v1/models")).json()
            assert models["data"][0]["id"] == "alias-l" and models["models"][0]["name"] == "alias-l"
            props = await (await s.get(f"{ll.url}/props")).json()
            assert props["total_slots"] == 3 and props["build_info"].startswith("b")


@pytest.mark.parametrize("engine", ENGINES)
async def test_health_when_ready(engine: str) -> None:
    async with sim(engine) as srv, aiohttp.ClientSession() as s, s.get(f"{srv.url}/health") as r:
        assert r.status == 200
        body = await r.read()
        if engine == "llamacpp":
            assert await r.json() == {"status": "ok"}
        else:
            assert body == b""


@pytest.mark.parametrize("engine", ENGINES)
async def test_chat_stream_framing_and_usage(engine: str) -> None:
    async with sim(engine) as srv, aiohttp.ClientSession() as s:
        status, chunks = await chat(s, srv.url, "tell me about caches", max_tokens=7, ignore_eos=True,
                                    stream_options={"include_usage": True})
        assert status == 200
        usage_chunk = chunks[-1]
        assert usage_chunk["choices"] == []
        usage = usage_chunk["usage"]
        body = chunks[:-1]
        if engine != "tgi":
            # Role-only first chunk (TGI puts the role on every delta instead).
            assert body[0]["choices"][0]["delta"]["role"] == "assistant"
            assert not body[0]["choices"][0]["delta"].get("content")
        contents = [c["choices"][0]["delta"].get("content") for c in body]
        tokens = [t for t in contents if t]
        # TGI ignores ignore_eos; the others stream exactly max_tokens.
        if engine != "tgi":
            assert len(tokens) == 7
        assert usage["completion_tokens"] == len(tokens)
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
        assert body[-1]["choices"][0]["finish_reason"] in ("length", "stop")
        assert all(c["choices"][0]["finish_reason"] is None for c in body[:-1])
        if engine == "llamacpp":
            assert body[-1]["choices"][0]["delta"] == {}  # separate finish chunk
            assert usage_chunk["timings"]["predicted_n"] == usage["completion_tokens"]
            assert usage_chunk["timings"]["prompt_n"] + usage_chunk["timings"]["cache_n"] == usage["prompt_tokens"]


async def test_prompt_tokens_identical_across_flavours() -> None:
    counts = set()
    async with aiohttp.ClientSession() as s:
        for engine in ENGINES:
            async with sim(engine) as srv:
                status, body = await chat(s, srv.url, "The same prompt, with punctuation: counted alike!",
                                          stream=False, max_tokens=2)
                assert status == 200
                counts.add(body["usage"]["prompt_tokens"])
    assert len(counts) == 1


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
async def test_continuous_usage_stats(engine: str) -> None:
    async with sim(engine) as srv, aiohttp.ClientSession() as s:
        status, chunks = await chat(s, srv.url, "hi", max_tokens=5, ignore_eos=True,
                                    stream_options={"include_usage": True, "continuous_usage_stats": True})
        assert status == 200
        seen = [c["usage"]["completion_tokens"] for c in chunks]
        assert seen[0] == 0  # role chunk
        assert seen[1:6] == [1, 2, 3, 4, 5]
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 5


async def test_no_usage_without_stream_options() -> None:
    async with sim("vllm") as srv, aiohttp.ClientSession() as s:
        status, chunks = await chat(s, srv.url, "hi", max_tokens=3, ignore_eos=True)
        assert status == 200
        assert all("usage" not in c for c in chunks)
        assert all(c["choices"] for c in chunks)


@pytest.mark.parametrize("engine", ENGINES)
async def test_completions_stream_and_whole(engine: str) -> None:
    async with sim(engine) as srv, aiohttp.ClientSession() as s:
        payload = {"prompt": "once upon a time", "max_tokens": 4, "ignore_eos": True, "stream": True}
        async with s.post(f"{srv.url}/v1/completions", json=payload) as r:
            assert r.status == 200
            chunks = sse_json(await read_sse(r))
        texts = [c["choices"][0]["text"] for c in chunks if c["choices"] and c["choices"][0]["text"]]
        assert all(c["object"] == "text_completion" for c in chunks)
        if engine != "tgi":
            assert len(texts) == 4
        payload["stream"] = False
        async with s.post(f"{srv.url}/v1/completions", json=payload) as r:
            body = await r.json()
        assert body["usage"]["completion_tokens"] == len(body["choices"][0]["text"].split())


async def test_max_completion_tokens_min_tokens_and_determinism() -> None:
    async with sim("vllm", seed=5) as srv, aiohttp.ClientSession() as s:
        _, a = await chat(s, srv.url, "a fixed question", stream=False, max_completion_tokens=3, ignore_eos=True)
        assert a["usage"]["completion_tokens"] == 3
        _, n1 = await chat(s, srv.url, "natural length please", stream=False, max_tokens=4000)
        _, n2 = await chat(s, srv.url, "natural length please", stream=False, max_tokens=4000)
        assert n1["choices"][0]["finish_reason"] == "stop"
        assert n1["choices"][0]["message"] == n2["choices"][0]["message"]  # same seed + prompt -> same text
        natural = n1["usage"]["completion_tokens"]
        _, m = await chat(s, srv.url, "natural length please", stream=False, max_tokens=4000,
                          min_tokens=natural + 10)
        assert m["usage"]["completion_tokens"] == natural + 10
    async with sim("vllm", seed=6) as srv, aiohttp.ClientSession() as s:
        _, other = await chat(s, srv.url, "natural length please", stream=False, max_tokens=4000)
        assert other["choices"][0]["message"] != n1["choices"][0]["message"]


async def test_vllm_natural_stop_streams_the_eos_token_as_empty_content() -> None:
    async with sim("vllm", seed=2) as srv, aiohttp.ClientSession() as s:
        status, chunks = await chat(s, srv.url, "stop naturally", max_tokens=4000,
                                    stream_options={"include_usage": True})
        assert status == 200
        last = chunks[-2]["choices"][0]
        assert last["finish_reason"] == "stop" and last["delta"]["content"] == "" and last["stop_reason"] is None
        visible = [c for c in chunks[1:-1] if c["choices"][0]["delta"].get("content")]
        assert chunks[-1]["usage"]["completion_tokens"] == len(visible) + 1
        _, whole = await chat(s, srv.url, "stop naturally", stream=False, max_tokens=4000)
        assert len(whole["choices"][0]["message"]["content"].split()) == whole["usage"]["completion_tokens"] - 1

"""The simulated engine's HTTP server (aiohttp) and the asyncio task that steps the scheduler.

Start-up follows the real engine: vLLM/trtllm/TGI bind the port but do not listen while "loading"
(clients get connection refused); SGLang does the same, then answers 503 on /health* while it warms
up; llama.cpp listens at once and answers 503 ``Loading model`` on every route until loaded.
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import sys
import time
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web
from prometheus_client import generate_latest

from console.sim import exposition
from console.sim.engines import make_flavour
from console.sim.engines.base import Flavour, SimOptions, StreamCtx, json_response
from console.sim.faults import Faults
from console.sim.scheduler import FINISHED, Request
from console.sim.tokens import WORD_JSON, WORD_TEXT, TextSource, chat_prompt, completion_prompt, token_ids, tokenize

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Sink:
    """Wakes one request's HTTP handler when the scheduler produced tokens for it."""

    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event = asyncio.Event()


class SimServer:
    def __init__(
        self,
        opts: SimOptions,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        load_time: float = 0.0,
        faults: Faults | None = None,
        access_log: bool = True,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.flavour: Flavour = make_flavour(opts)
        self.opts = opts
        self.host = host
        self.port = port
        self.load_time = load_time
        self.faults = faults or Faults()
        self.access_log = access_log
        self.log = log or _print
        self.state = "loading"  # loading | warmup | ready
        self.ready_at: float | None = None
        self.started_at = time.time()
        self._rng = random.Random(opts.seed)
        self._work = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._runner: web.AppRunner | None = None
        self._sock: socket.socket | None = None
        self._req_no = 0
        self.listening = asyncio.Event()

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Bind now; listen and serve according to the engine's loading behaviour (runs in background)."""
        fam = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(fam, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self._sock = sock
        self.port = sock.getsockname()[1]
        app = web.Application(middlewares=[self._middleware], client_max_size=64 * 1024 * 1024)
        self._routes(app)
        # Streams in flight at shutdown are aborted: the scheduler that feeds them is cancelled first,
        # so waiting for them (aiohttp waits shutdown_timeout in two phases) only delays the exit:
        # under the demo's load a 1 s timeout made the simulator take 2.2 s to end on SIGTERM.
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.1)
        await self._runner.setup()
        for line in self.flavour.startup_lines(self.host, self.port):
            self.log(line)
        self._tasks.append(asyncio.create_task(self._lifecycle()))
        self._tasks.append(asyncio.create_task(self._run_scheduler()))
        self._tasks.append(asyncio.create_task(self._periodic_log()))
        if self.faults.crash_after is not None:
            self._tasks.append(asyncio.create_task(self._crash(self.faults.crash_after)))

    async def _listen(self) -> None:
        assert self._runner is not None and self._sock is not None
        site = web.SockSite(self._runner, self._sock)
        await site.start()
        self.listening.set()

    async def _lifecycle(self) -> None:
        loading = self.flavour.loading
        lt = self.load_time
        if loading == "503":
            await self._listen()
            if lt > 0:
                await asyncio.sleep(lt)
        elif loading == "refuse-then-503":
            await asyncio.sleep(lt * 0.7)
            self.state = "warmup"
            await self._listen()
            await asyncio.sleep(lt * 0.3)
        else:
            await asyncio.sleep(lt)
            await self._listen()
        self.state = "ready"
        self.ready_at = time.time()
        ready = getattr(self.flavour, "ready_line", None)
        if callable(ready):
            self.log(str(ready()).replace("{host}", self.host).replace("{port}", str(self.port)))
        if self.faults.stall_start is not None:
            self._tasks.append(asyncio.create_task(self._stall_marker()))

    async def _stall_marker(self) -> None:
        assert self.faults.stall_start is not None
        await asyncio.sleep(self.faults.stall_start)
        self.log(f"WARNING {_hms()} simulated decode stall for {self.faults.stall_seconds:g} s")

    async def _crash(self, after: float) -> None:
        await asyncio.sleep(after)
        self.log(f"ERROR {_hms()} EngineCore encountered a fatal error (simulated crash-after={after:g}s); exiting")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            try:
                await t
            except (asyncio.CancelledError, Exception):
                pass
        if self._runner is not None:
            await self._runner.cleanup()
        if self._sock is not None:
            self._sock.close()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    # ------------------------------------------------------------------ scheduler loop
    def _stalled_until(self, now: float) -> float | None:
        f = self.faults
        if f.stall_start is None or self.ready_at is None:
            return None
        start = self.ready_at + f.stall_start
        end = start + f.stall_seconds
        return end if start <= now < end else None

    async def _run_scheduler(self) -> None:
        sched = self.flavour.scheduler
        while True:
            if sched.idle:
                self._work.clear()
                await self._work.wait()
            now = time.time()
            until = self._stalled_until(now)
            if until is not None:
                await asyncio.sleep(until - now)
                continue
            out = sched.step(now)
            if out is None:
                continue
            delay = out.end - time.time()
            await asyncio.sleep(delay if delay > 0 else 0)
            for r in out.emitted:
                r.sink.event.set()  # type: ignore[attr-defined]
            for r in out.finished:
                r.sink.event.set()  # type: ignore[attr-defined]

    async def _periodic_log(self) -> None:
        while True:
            await asyncio.sleep(10.0)
            if self.state == "ready" and not self.flavour.scheduler.idle:
                line = self.flavour.periodic_line()
                if line:
                    self.log(line)

    # ------------------------------------------------------------------ HTTP plumbing
    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        fl = self.flavour
        path = request.path
        if path.startswith("/_sim/"):
            return await handler(request)
        t0 = time.perf_counter()
        if self.state == "loading" and fl.loading == "503":
            resp: web.StreamResponse = fl.error(503, "Loading model", "unavailable")
        elif self.state == "warmup" and path.startswith("/health"):
            resp = web.Response(status=503)
        elif fl.auth_required(path) and not fl.auth_ok(request):
            resp = fl.unauthorized()
        else:
            try:
                resp = await handler(request)
            except web.HTTPNotFound:
                resp = self._not_found()
            except web.HTTPMethodNotAllowed:
                resp = fl.error(405, "Method Not Allowed", "bad_request") if fl.name == "llamacpp" else \
                    json_response({"detail": "Method Not Allowed"}, 405)
        route = request.match_info.route.resource
        fl.on_http(route.canonical if route is not None else "none", request.method, resp.status,
                   time.perf_counter() - t0)
        if self.access_log:
            peer = request.remote or "-"
            port = request.transport.get_extra_info("peername")[1] if request.transport else 0
            self.log(fl.access_line(f"{peer}:{port}", request.method, path, resp.status))
        return resp

    def _not_found(self) -> web.Response:
        fl = self.flavour
        if fl.name == "llamacpp":
            return fl.error(404, "File Not Found", "not_found")
        if fl.name == "tgi":
            return web.Response(status=404)
        return json_response({"detail": "Not Found"}, 404)

    def _routes(self, app: web.Application) -> None:
        fl = self.flavour
        r = app.router
        r.add_get("/health", self._health)
        r.add_get("/v1/models", self._models)
        r.add_post("/v1/chat/completions", self._chat)
        r.add_post("/v1/completions", self._completions)
        if fl.name == "sglang":
            r.add_get("/health_generate", self._health)
        self._mount_metrics(app)
        r.add_get("/_sim/state", self._sim_state)
        fl.add_routes(app, self)

    async def _health(self, request: web.Request) -> web.Response:
        if self.flavour.name == "sglang":
            # SGLang's /health runs a 1-token generation through the scheduler: a stalled scheduler
            # delays it, and after SGLANG_HEALTH_CHECK_TIMEOUT (20 s) it answers 503.
            until = self._stalled_until(time.time())
            if until is not None:
                wait = until - time.time()
                await asyncio.sleep(min(wait, 20.0))
                if wait > 20.0:
                    return web.Response(status=503)
        return self.flavour.health_ok()

    async def _models(self, request: web.Request) -> web.Response:
        return json_response(self.flavour.models_payload())

    async def _sim_state(self, request: web.Request) -> web.Response:
        state = self.flavour.state(requests=request.query.get("requests") != "0")
        return web.Response(body=orjson.dumps(state), content_type="application/json")

    def _mount_metrics(self, app: web.Application) -> None:
        """Serve /metrics as the engine does (see console/sim/exposition.py)."""
        fl = self.flavour
        path = fl.metrics_path
        if fl.metrics_mount == "custom":
            app.router.add_get(path, self._metrics)
            return
        reg = fl.metrics_registry()
        asgi = exposition.asgi_app(reg)

        async def mounted(request: web.Request) -> web.StreamResponse:
            faulted = await self._metrics_fault()
            return faulted if faulted is not None else await exposition.serve_asgi(asgi, request)

        every = self.opts.metrics_every
        rendered: list[tuple[float, bytes]] = []

        async def plain(request: web.Request) -> web.StreamResponse:
            faulted = await self._metrics_fault()
            if faulted is not None:
                return faulted
            if every <= 0:
                return exposition.plain_response(reg)
            now = time.monotonic()
            if not rendered or now - rendered[0][0] >= every:
                rendered[:] = [(now, generate_latest(reg))]
            return exposition.plain_response(reg, rendered[0][1])

        app.router.add_route("*", path, plain if fl.metrics_mount == "plain" else mounted)
        # Starlette's Mount with the engines' "^/metrics(?P<path>.*)$" regex: everything below goes to the app.
        app.router.add_route("*", path + "{tail:/.*}", mounted)

    async def _metrics_fault(self) -> web.Response | None:
        f = self.faults
        if f.hang_metrics:
            await asyncio.Event().wait()
        if f.slow_metrics:
            await asyncio.sleep(f.slow_metrics)
        if f.garbage_metrics:
            junk = bytes(self._rng.randrange(256) for _ in range(512))
            return web.Response(body=b"\x00\xffnot prometheus {{{ " + junk, content_type="text/plain")
        return None

    async def _metrics(self, request: web.Request) -> web.Response:
        faulted = await self._metrics_fault()
        return faulted if faulted is not None else self.flavour.render_metrics(request.headers.get("Accept", ""))

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=True)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=False)

    # ------------------------------------------------------------------ generation
    async def _generate(self, request: web.Request, *, chat: bool) -> web.StreamResponse:
        fl = self.flavour
        received = time.time()
        raw = await request.read()
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            return fl.bad_json(str(exc))
        if not isinstance(body, dict):
            return fl.schema_error("invalid type: expected a JSON object")
        extra = fl.unknown_fields(body, chat)
        if extra:
            name = "ChatCompletionRequest" if chat else "CompletionRequest"
            lines = [f"{len(extra)} validation error{'s' if len(extra) > 1 else ''} for {name}"]
            for k in extra:
                lines.append(f"{k}\n  Extra inputs are not permitted [type=extra_forbidden, input_value="
                             f"{body[k]!r}, input_type={type(body[k]).__name__}]")
            return fl.validation_error("\n".join(lines))
        try:
            prompt = chat_prompt(body.get("messages")) if chat else completion_prompt(body.get("prompt"))
        except ValueError as exc:
            field = "messages" if chat else "prompt"
            if body.get(field) is None:
                return fl.schema_error(f"missing field `{field}`")
            return fl.schema_error(str(exc))
        model = body.get("model")
        if fl.checks_model and model is not None and model != fl.model:
            return fl.unknown_model(str(model))
        if self.faults.error_rate and self._rng.random() < self.faults.error_rate:
            fl.on_error(500)
            return fl.error(500, "Simulated engine failure (--fault error-rate)", "server_error")

        tokens = tokenize(prompt)
        ids = token_ids(tokens)
        limit = fl.max_model_len
        if len(ids) >= limit:
            return fl.context_error(len(ids), limit)
        max_tokens: Any = body.get("max_completion_tokens") if chat else None
        if max_tokens is None:
            max_tokens = body.get("max_tokens")
        if max_tokens is None or (fl.name == "llamacpp" and max_tokens == -1):
            max_tokens = limit - len(ids)
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            return fl.validation_error("max_tokens must be a positive integer")
        max_tokens = min(max_tokens, limit - len(ids))
        ignore_eos = bool(body.get("ignore_eos")) if fl.supports_ignore_eos else False
        min_tokens = body.get("min_tokens") if fl.supports_min_tokens else 0
        if not isinstance(min_tokens, int) or isinstance(min_tokens, bool):
            min_tokens = 0
        seed = body.get("seed")
        if not isinstance(seed, int) or isinstance(seed, bool):
            seed = self.opts.seed
        source = TextSource(seed, zlib.crc32(prompt.encode()))
        eos_len = source.natural_length(limit)

        self._req_no += 1
        req = Request(id=f"req-{self._req_no}", prompt_ids=ids, max_tokens=max_tokens, eos_len=eos_len,
                      min_tokens=min_tokens, ignore_eos=ignore_eos, received=received)
        sink = Sink()
        req.sink = sink
        so = body.get("stream_options")
        so = so if isinstance(so, dict) else {}
        default_usage = fl.name == "trtllm" and bool(so)  # trtllm: include_usage defaults to True
        ctx = StreamCtx(
            id=fl.new_id(chat),
            created=int(time.time()),
            model=fl.model if (not fl.checks_model or model is None) else str(model),
            chat=chat,
            include_usage=bool(so.get("include_usage", default_usage)),
            continuous_usage=fl.supports_continuous_usage and bool(so.get("continuous_usage_stats")),
            req=req,
        )
        fl.scheduler.add(req, time.time())
        self._work.set()
        if body.get("stream"):
            return await self._stream(request, ctx, source, sink)
        return await self._whole(ctx, source, sink)

    async def _whole(self, ctx: StreamCtx, source: TextSource, sink: Sink) -> web.Response:
        req = ctx.req
        try:
            while req.state != FINISHED:
                await sink.event.wait()
                sink.event.clear()
        except asyncio.CancelledError:
            self.flavour.scheduler.abort(req, time.time())
            raise
        words = [WORD_TEXT[source.next_index()] for _ in range(req.generated)]
        if req.finish_reason == "stop" and not self.flavour.eos_visible and words:
            words.pop()  # the EOS token
        text = "".join(words)
        fl = self.flavour
        body = fl.chat_response(ctx, text) if ctx.chat else fl.text_response(ctx, text)
        return json_response(body)

    async def _stream(self, request: web.Request, ctx: StreamCtx, source: TextSource, sink: Sink
                      ) -> web.StreamResponse:
        fl = self.flavour
        req = ctx.req
        resp = web.StreamResponse(status=200, headers=fl.stream_headers())
        try:
            await resp.prepare(request)
            fl.prepare_stream(ctx)
            head = fl.sse_head(ctx)
            if head:
                await resp.write(head)
            sent = 0
            while True:
                await sink.event.wait()
                sink.event.clear()
                n = req.generated
                done = req.state == FINISHED
                parts: list[bytes] = []
                while sent < n:
                    idx = source.next_index()
                    sent += 1
                    ctx.extra["sent"] = sent
                    last = done and sent == n
                    if last and req.finish_reason == "stop" and not fl.eos_visible:
                        # The EOS token is counted in usage but detokenizes to nothing.
                        parts.append(fl.sse_token(ctx, b'""', "", "stop"))
                        continue
                    parts.append(fl.sse_token(ctx, WORD_JSON[idx], WORD_TEXT[idx],
                                              req.finish_reason if last else None))
                if done:
                    parts.append(fl.sse_tail(ctx, req.finish_reason or "stop"))
                    await resp.write(b"".join(parts))
                    break
                if parts:
                    await resp.write(b"".join(parts))
            await resp.write_eof()
        except (ConnectionError, asyncio.CancelledError):
            fl.scheduler.abort(req, time.time())
            raise
        return resp


def _hms() -> str:
    return time.strftime("%H:%M:%S")


def _print(line: str) -> None:
    print(line, flush=True)


async def serve(opts: SimOptions, *, host: str, port: int, load_time: float, faults: Faults,
                access_log: bool = True) -> None:
    """Run one simulated engine until cancelled (or its parent process disappears)."""
    server = SimServer(opts, host=host, port=port, load_time=load_time, faults=faults, access_log=access_log)
    await server.start()
    parent = os.getppid()
    try:
        while True:
            await asyncio.sleep(1.0)
            # Exit when the process that started us is gone (no orphans if a fleet parent dies).
            if os.getppid() != parent:
                server.log("parent process exited; shutting down")
                break
    finally:
        await server.stop()

"""The site agent's HTTPS server: mutual TLS, and bounds on what any caller can make the site hold.

:class:`~ensemble_dask.federated.site.agent.SiteAgent` answers the operations; this module puts it behind
Tornado. Whoever connects (a stranger, any holder of a certificate of the federation's CA, the coordinator)
is bounded before the agent sees a byte:

* a TLS handshake must finish within :data:`HANDSHAKE_SECONDS`, and at most :data:`MAX_HANDSHAKES` are
  under way at once: connections that never speak TLS cannot hold the site's file descriptors;
* connections after the handshake are counted by who holds them: at most :data:`MAX_OTHER_CONNECTIONS`
  of certificates other than the coordinator's (each is refused at its first request), so strangers cannot
  crowd out the coordinator, which may hold :data:`MAX_COORDINATOR_CONNECTIONS`; a connection over either
  count is closed at once;
* a request's caller is checked when its headers arrive, before its body is read: a body that is not the
  coordinator's is never read, and at most :data:`MAX_BODIES` requests (each body up to the site's
  ``max_body_bytes``) are read or answered at once: a request holds its place until its answer is written,
  and an answer the caller does not read within the site's ``write_timeout`` closes its connection (an
  unread answer is held in the server's buffer, and each of 64 connections could hold one).
"""

from __future__ import annotations

import asyncio
import logging
import re
import ssl
import uuid

from ..protocol import wire
from ..protocol.wire import peer_name
from .config import _short
from .ops import Refused

__all__ = [
    "HANDSHAKE_SECONDS", "MAX_HANDSHAKES", "MAX_COORDINATOR_CONNECTIONS", "MAX_OTHER_CONNECTIONS",
    "MAX_BODIES", "server_context", "make_app", "serve",
]  # fmt: skip

logger = logging.getLogger(__name__)

#: seconds a connection has to complete its TLS handshake
HANDSHAKE_SECONDS = 10.0
#: TLS handshakes under way at once; a connection over the count is closed at once. Far below the usual
#: limit of 1,024 file descriptors, so that raw connections never leave the site without one; a flood of
#: more connections than this, renewed every :data:`HANDSHAKE_SECONDS`, still keeps the coordinator out
#: while it lasts (a denial of service at the network's level, which a firewall in front of the site stops)
MAX_HANDSHAKES = 512
#: connections of the coordinator's certificate held at once
MAX_COORDINATOR_CONNECTIONS = 64
#: connections of other certificates of the CA held at once (their requests are refused)
MAX_OTHER_CONNECTIONS = 8
#: requests read or answered at once (the coordinator's; each body up to the site's ``max_body_bytes``): a
#: request counts until its answer is written (an unread answer stays in the server's buffer)
MAX_BODIES = 4

_ROUTE = re.compile(r"/v1/([a-z_]+)")


def server_context(tls):
    """Server TLS context: the site's certificate; callers must present one signed by the CA."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=tls["ca"])
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(tls["cert"], tls["key"])
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def _peer(stream):
    return peer_name(getattr(stream, "socket", None))


def make_app(agent):
    """The Tornado application of ``agent``: ``POST /v1/<op>``, the caller checked before the body is read."""
    import tornado.web
    from tornado.ioloop import IOLoop

    reading = [0]  # bodies being read (the IO loop's thread only)

    # every path comes to Handler, so that no caller's body is read by Tornado's handler of unknown paths
    @tornado.web.stream_request_body
    class Handler(tornado.web.RequestHandler):
        def prepare(self):
            self.peer = _peer(self.request.connection.stream)
            self.chunks, self.size = [], 0  # joined once: no growing buffer copied as it grows
            self.counted = self.posting = False
            route = _ROUTE.fullmatch(self.request.path)
            op = route.group(1) if route else self.request.path
            try:
                agent.check_caller(self.peer)  # before the body is read: a stranger's is never read
                if route is None or self.request.method != "POST":
                    raise Refused(f"site {agent.config.name!r} answers POST /v1/<operation> only")
                if reading[0] >= MAX_BODIES:
                    raise Refused(f"site {agent.config.name!r} is reading {MAX_BODIES} requests; try again")
            except Refused as exc:
                agent.audit(self.peer, _short(op), {}, "refused", str(exc))
                self._reply({"error": str(exc), "refused": True}, 403)
                return
            reading[0] += 1
            self.counted = True

        def data_received(self, chunk):
            self.size += len(chunk)
            if self.size > agent.config.max_body_bytes:
                raise tornado.web.HTTPError(413)
            self.chunks.append(chunk)

        def _release(self):
            if self.counted:
                self.counted = False
                reading[0] -= 1

        def on_finish(self):  # (called as finish() hands the answer to the stream, before it is written)
            if not self.posting:
                self._release()

        def on_connection_close(self):
            if not self.posting:  # a body being answered stays counted until it is (post's finally)
                self._release()

        def _reply(self, message, status):
            self._send(wire.encode(message), status)

        def _send(self, answer, status):
            """Hand ``answer`` to the stream; the future of its write, or None if the caller hung up."""
            stream = getattr(self.request.connection, "stream", None)
            if stream is None or stream.closed():  # the caller hung up: nothing to send
                return None
            self.set_status(status)
            self.set_header("Content-Type", "application/msgpack")
            return self.finish(answer)

        async def _write(self, answer, status):
            """Send ``answer`` and wait until it is written; a caller that does not read it within the site's
            ``write_timeout`` loses its connection, and the buffered answer with it."""
            written = self._send(answer, status)
            del answer
            if written is None:
                return
            done, _ = await asyncio.wait({written}, timeout=agent.config.write_timeout)
            if not done:
                op = _ROUTE.fullmatch(self.request.path).group(1)
                agent.audit(self.peer, op, {}, "closed", "answer not read in time")
                self.request.connection.stream.close()  # (the write's future then ends: tornado sets it)

        async def post(self, path):
            op = _ROUTE.fullmatch(self.request.path).group(1)
            self.posting = True
            try:  # (the body counted among MAX_BODIES until its answer is written; only _answer holds it)
                await self._write(*await self._answer(op, self._body()))
            finally:
                self.posting = False
                self._release()

        def _body(self):
            body = b"".join(self.chunks)
            self.chunks.clear()
            return body

        async def _answer(self, op, body):
            """The encoded answer to ``op`` with the message ``body``, and its HTTP status."""
            audited = False  # handle() audits what it refuses
            try:
                loop = IOLoop.current()
                msg = await loop.run_in_executor(agent.executor, wire.decode, body)
                del body
                audited = True
                result = await loop.run_in_executor(agent.executor, agent.handle, self.peer, op, msg)
                answer, status = wire.encode({"result": result}), 200  # (a fault encoding it: audited below)
            except (Refused, wire.WireError) as exc:
                if not audited:
                    agent.audit(self.peer, op, {}, "refused", str(exc))
                reply = {"error": str(exc), "refused": True}
                if getattr(exc, "code", None):
                    reply["code"] = exc.code
                answer, status = wire.encode(reply), 403
            except Exception as exc:  # a fault at the site: its details (maybe data) stay in the site's log
                fault = uuid.uuid4().hex[:12]
                logger.exception("site %s: %s failed (fault %s)", agent.config.name, op, fault)
                agent.audit(self.peer, op, {}, "failed", f"fault {fault}: {type(exc).__name__}: {exc}")
                error = f"site {agent.config.name!r} failed in {_short(op)} (fault {fault} in its own log)"
                answer, status = wire.encode({"error": error, "refused": False}), 500
            return answer, status

    return tornado.web.Application([(r"/(.*)", Handler)])


def _server_class():
    import tornado.httpserver

    class Server(tornado.httpserver.HTTPServer):
        """Tornado's HTTPS server with the connection bounds of this module."""

        def initialize(self, *args, coordinator=None, **kwargs):
            super().initialize(*args, **kwargs)
            self.coordinator = coordinator
            self.handshaking = 0
            self.tasks = set()
            self.held = {True: set(), False: set()}  # streams after their handshake, by: the coordinator's?

        def handle_stream(self, stream, address):
            if self.handshaking >= MAX_HANDSHAKES:
                stream.close()
                return
            self.handshaking += 1
            task = asyncio.ensure_future(self._after_handshake(stream, address))
            self.tasks.add(task)  # (a reference until it ends: the loop keeps only a weak one)
            task.add_done_callback(self.tasks.discard)

        async def _after_handshake(self, stream, address):
            try:
                await asyncio.wait_for(stream.wait_for_handshake(), HANDSHAKE_SECONDS)
            except Exception:  # noqa: BLE001 - too slow, no TLS, a certificate the CA did not sign
                stream.close()
                return
            finally:
                self.handshaking -= 1
            mine = _peer(stream) == self.coordinator
            held = self.held[mine]
            held.difference_update([s for s in held if s.closed()])
            if len(held) >= (MAX_COORDINATOR_CONNECTIONS if mine else MAX_OTHER_CONNECTIONS):
                stream.close()
                return
            held.add(stream)
            super().handle_stream(stream, address)

    return Server


def serve(agent):
    """Run ``agent`` (a :class:`~ensemble_dask.federated.site.agent.SiteAgent`) until SIGTERM or SIGINT."""
    import signal

    import tornado.netutil

    config = agent.config

    async def main():
        server = _server_class()(
            make_app(agent),
            ssl_options=server_context(config.tls),
            max_body_size=config.max_body_bytes,
            max_buffer_size=config.max_body_bytes,
            idle_connection_timeout=300,  # a caller that opens a connection and says nothing is dropped
            body_timeout=600,
            coordinator=config.coordinator,
        )
        sockets = tornado.netutil.bind_sockets(config.port, address=config.host)
        server.add_sockets(sockets)
        port = sockets[0].getsockname()[1]
        address = f"https://{config.host}:{port}"
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(agent.executor, lambda: agent.client)  # its own cluster, up before ready
        print(f"site {config.name} listening on {address} (answers {config.coordinator!r} only)", flush=True)
        if config.ready_file is not None:
            tmp = config.ready_file.with_suffix(".tmp")
            tmp.write_text(address)
            tmp.replace(config.ready_file)
        done = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, done.set)
        await done.wait()
        server.stop()
        await loop.run_in_executor(agent.executor, agent.close)  # the site's own cluster, in its thread

    asyncio.run(main())
    return 0

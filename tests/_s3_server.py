"""moto's S3 server, with S3's atomic conditional writes: ``python -m tests._s3_server HOST PORT``.

moto checks ``If-None-Match: *`` (and ``If-Match``) of a PUT and then stores the object in two steps, and
its server answers requests on threads, so two conditional PUTs of one new key that arrive together can
both succeed (moto 5.2: ``PreconditionFailed`` is raised only when ``get_object`` already finds the key).
S3 decides conditional writes atomically: of several, the first to finish succeeds, the others get 412.
The run store's lease (``ensemble_dask.io.lease``) relies on that, so here the writes of one key (PUT,
POST, DELETE) are taken one at a time; reads, and writes of other keys, still run side by side.

``--switch-interval S`` sets the interpreter's thread switch interval (default Python's 0.005 s): a tiny one
makes a thread switch between moto's check and its write likely, for the test that shows the race
(``--unlocked`` serves moto as it is).
"""

from __future__ import annotations

import argparse
import collections
import sys
import threading


def atomic_writes(app):
    """WSGI middleware: requests that write one key (same method-independent path) run one at a time."""
    guard = threading.Lock()
    locks = collections.defaultdict(threading.Lock)

    def serve(environ, start_response):
        if environ.get("REQUEST_METHOD") not in ("PUT", "POST", "DELETE"):
            return app(environ, start_response)
        key = (environ.get("HTTP_HOST", ""), environ.get("PATH_INFO", ""))
        with guard:
            lock = locks[key]
        with lock:  # moto builds the whole response inside the call: the write is done when it returns
            return app(environ, start_response)

    return serve


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("--unlocked", action="store_true", help="moto as it is (conditional writes can race)")
    parser.add_argument("--switch-interval", type=float, default=None)
    args = parser.parse_args(argv)
    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import run_simple

    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(args.host, args.port, app if args.unlocked else atomic_writes(app), threaded=True)


if __name__ == "__main__":
    main()

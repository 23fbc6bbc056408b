"""A stand-in Hugging Face Hub on 127.0.0.1 for tests: never the network.

It answers the few endpoints huggingface_hub 2.x calls for what run/assets/fetch.py does:

    GET  /api/{models|datasets}/{id}/auth-check          200, or 401/403 with X-Error-Code GatedRepo
    GET  /api/{models|datasets}/{id}/revision/{rev}      repo info: sha and siblings
    GET  /api/{models|datasets}/{id}/tree/{rev}          the file list (one page)
    HEAD|GET /[datasets/]{id}/resolve/{rev}/{path}       the file, with X-Repo-Commit, ETag and
                                                         Content-Length; Range requests get 206

A gated repo answers 401 without a token and 403 with a token not in `accepted`. `fail` maps a
file path to an HTTP status that file answers with (the test clears it to let a retry through).
The server is bounded: it stops by itself after `max_requests` requests or `max_seconds`, and
`requests` records (method, path) of each request so tests can tell what was fetched.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlparse


@dataclass
class Repo:
    files: dict[str, bytes]
    kind: str = "model"  # or "dataset"
    gated: bool = False
    # other revisions (e.g. refs/convert/parquet) and their files
    revisions: dict[str, dict[str, bytes]] = field(default_factory=dict)

    def files_at(self, rev: str) -> dict[str, bytes] | None:
        if rev in ("main", self.sha("main")):
            return self.files
        for name, files in self.revisions.items():
            if rev in (name, self.sha(name)):
                return files
        return None

    def sha(self, rev: str) -> str:
        return hashlib.sha1(f"{rev}:{sorted(self.files_at_name(rev))}".encode()).hexdigest()

    def files_at_name(self, rev: str) -> dict[str, bytes]:
        return self.files if rev == "main" else self.revisions[rev]

    def rev_name(self, rev: str) -> str:
        for name in ("main", *self.revisions):
            if rev in (name, self.sha(name)):
                return name
        raise KeyError(rev)


class FakeHub:
    def __init__(
        self,
        repos: dict[str, Repo],
        accepted: tuple[str, ...] = ("hf_good",),
        max_requests: int = 400,
        max_seconds: float = 60.0,
    ):
        self.repos = repos
        self.accepted = accepted
        self.fail: dict[str, int] = {}
        self.requests: list[tuple[str, str]] = []
        self.max_requests = max_requests
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_HEAD(self) -> None:
                hub._serve(self, body=False)

            def do_GET(self) -> None:
                hub._serve(self, body=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._timer = threading.Timer(max_seconds, self.stop)
        self._timer.daemon = True

    def __enter__(self) -> FakeHub:
        self._thread.start()
        self._timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        self._timer.cancel()
        threading.Thread(target=self.server.shutdown, daemon=True).start()
        self.server.server_close()

    def fetched(self, path_end: str) -> int:
        """How many GETs of a resolve URL ending in path_end the server answered."""
        return sum(1 for m, p in self.requests if m == "GET" and p.endswith(path_end))

    # ------------------------------------------------------------------ request handling
    def _send(
        self, h: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str]
    ) -> None:
        h.send_response(status)
        # no keep-alive: a pooled connection would outlive this server, and a later server bound
        # to the same ephemeral port would get its requests mid-stream
        for k, v in {"Content-Length": str(len(body)), "Connection": "close", **headers}.items():
            h.send_header(k, v)
        h.end_headers()
        if h.command == "GET":
            h.wfile.write(body)

    def _json(self, h: BaseHTTPRequestHandler, obj: Any, status: int = 200, **hdr: str) -> None:
        self._send(h, status, json.dumps(obj).encode(), {"Content-Type": "application/json", **hdr})

    def _denied(self, h: BaseHTTPRequestHandler, repo: Repo) -> bool:
        if not repo.gated:
            return False
        auth = h.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ").strip()
        if token in self.accepted:
            return False
        status = 403 if token else 401
        msg = {"error": "Access to model is restricted. You must have access to it."}
        self._json(h, msg, status, **{"X-Error-Code": "GatedRepo"})
        return True

    def _serve(self, h: BaseHTTPRequestHandler, body: bool) -> None:
        path = urlparse(h.path).path
        self.requests.append((h.command, path))
        if len(self.requests) > self.max_requests:
            self._json(h, {"error": "fake hub: request budget spent"}, 503)
            threading.Thread(target=self.stop, daemon=True).start()
            return
        parts = [unquote(p) for p in path.strip("/").split("/")]
        if parts[0] == "api":
            return self._api(h, parts[1:])
        kind = "model"
        if parts[0] == "datasets":
            kind, parts = "dataset", parts[1:]
        if len(parts) >= 5 and parts[2] == "resolve":
            return self._resolve(h, kind, "/".join(parts[:2]), parts[3], "/".join(parts[4:]))
        self._json(h, {"error": "not found"}, 404)

    def _repo(self, h: BaseHTTPRequestHandler, kind: str, repo_id: str) -> Repo | None:
        repo = self.repos.get(repo_id)
        if repo is None or repo.kind != kind:
            self._json(
                h, {"error": "Repository not found"}, 404, **{"X-Error-Code": "RepoNotFound"}
            )
            return None
        return repo

    def _api(self, h: BaseHTTPRequestHandler, parts: list[str]) -> None:
        kind = {"models": "model", "datasets": "dataset"}.get(parts[0], "")
        repo_id, rest = "/".join(parts[1:3]), parts[3:]
        repo = self._repo(h, kind, repo_id)
        if repo is None or self._denied(h, repo):
            return
        if rest == ["auth-check"]:
            return self._json(h, {})
        if len(rest) >= 2 and rest[0] in ("revision", "tree"):
            rev = "/".join(rest[1:])
            files = repo.files_at(rev)
            if files is None:
                self._json(h, {"error": "bad rev"}, 404, **{"X-Error-Code": "RevisionNotFound"})
                return
            sha = repo.sha(repo.rev_name(rev))
            if rest[0] == "revision":
                siblings = [{"rfilename": p} for p in sorted(files)]
                return self._json(h, {"id": repo_id, "sha": sha, "siblings": siblings})
            tree = [
                {"type": "file", "oid": _oid(data), "size": len(data), "path": p}
                for p, data in sorted(files.items())
            ]
            return self._json(h, tree)
        self._json(h, {"error": "not found"}, 404)

    def _resolve(self, h: BaseHTTPRequestHandler, kind: str, repo_id: str, rev: str, path: str):
        repo = self._repo(h, kind, repo_id)
        if repo is None or self._denied(h, repo):
            return
        files = repo.files_at(rev)
        if files is None or path not in files:
            self._json(h, {"error": "entry"}, 404, **{"X-Error-Code": "EntryNotFound"})
            return
        if path in self.fail:
            self._json(h, {"error": "injected"}, self.fail[path])
            return
        data = files[path]
        headers = {
            "X-Repo-Commit": repo.sha(repo.rev_name(rev)),
            "ETag": f'"{_oid(data)}"',
            "Accept-Ranges": "bytes",
        }
        start = 0
        rng = h.headers.get("Range", "")
        if rng.startswith("bytes="):
            start = int(rng[6:].split("-")[0] or 0)
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        self._send(h, 206 if start else 200, data[start:], headers)


def _oid(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()

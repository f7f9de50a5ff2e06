"""Swap the budget map of a running Python process: the apply hook of ripplekv-agent.

A serving process holding a MapPress (ripplekv.kvpress) starts a ReloadServer on a Unix socket;
the agent's apply hook (docs/ROLLOUTS.md, "The apply hook") asks it to take the map the agent
has just written, and succeeds only once the process holds it:

    ripplekv-agent ... --out /srv/map.json --format native \\
        --apply-cmd 'python -m ripplekv.reload --socket /run/serving/reload.sock'

The hook reads RIPPLEKV_MAP_FILE and RIPPLEKV_MAP_VERSION (an empty version: the map was
removed, and the process stops compressing). The process reads and checks the map (its shape,
the selector's floor) before swapping it, so a map it cannot use leaves the previous one in
place, and the hook exits 1 with the reason as its last stderr line, which the agent reports
(`apply hook exited 1: ...`). Exit 0 prints what the process now holds.

Protocol: one JSON line each way per connection. Request `{"map": PATH or null, "version":
STR}`; reply `{"ok": true, "version": STR, "layers": L, "total_tokens": T}` (`layers` 0 for
no map) or `{"ok": false, "error": STR}`. Nothing here imports torch.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading
from pathlib import Path
from typing import Any, Dict, Optional, Protocol, Sequence

from ripplekv.maps import Budgets, MapError

#: The longest request or reply line read.
MAX_LINE_BYTES = 1 << 16


class MapHolder(Protocol):
    def update(self, source: Optional[str]) -> Optional[Budgets]: ...


class ReloadFailed(RuntimeError):
    """The process refused the map, or could not be reached."""


def _read_line(conn: socket.socket) -> bytes:
    data = b""
    while b"\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_LINE_BYTES:
            raise ValueError(f"line longer than {MAX_LINE_BYTES} bytes")
    return data.split(b"\n", 1)[0]


class ReloadServer:
    """Serves reload requests for `holder` (a MapPress) on the Unix socket `path` from a daemon
    thread, one request at a time. The socket file is created with mode 0600 (only this user may
    swap the map); a stale file at `path` is replaced. `version` is the version held (set by
    each successful request)."""

    def __init__(self, holder: MapHolder, path: str, version: str = "") -> None:
        self.holder = holder
        self.path = path
        self.version = version
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if os.path.exists(path):
            os.unlink(path)
        old_umask = os.umask(0o177)
        try:
            self._sock.bind(path)
        finally:
            os.umask(old_umask)
        self._sock.listen(8)
        self._thread = threading.Thread(target=self._serve, name="ripplekv-reload", daemon=True)
        self._thread.start()

    def handle(self, request: Dict[str, Any]) -> Dict[str, Any]:
        """The reply to one request (also usable without the socket)."""
        source = request.get("map")
        if source is not None and not isinstance(source, str):
            return {"ok": False, "error": "field \"map\" must be a path or null"}
        try:
            budgets = self.holder.update(source)
        except (MapError, OSError, ValueError) as e:
            return {"ok": False, "error": str(e)}
        self.version = str(request.get("version") or "") if source is not None else ""
        if budgets is None:
            return {"ok": True, "version": self.version, "layers": 0, "total_tokens": 0}
        return {"ok": True, "version": self.version, "layers": len(budgets.tokens),
                "total_tokens": budgets.total_tokens}

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            with conn:
                try:
                    request = json.loads(_read_line(conn))
                    if not isinstance(request, dict):
                        raise ValueError("the request is not a JSON object")
                    reply = self.handle(request)
                except (ValueError, UnicodeDecodeError) as e:
                    reply = {"ok": False, "error": f"bad request: {e}"}
                try:
                    conn.sendall(json.dumps(reply).encode() + b"\n")
                except OSError:
                    pass

    def close(self) -> None:
        self._sock.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def request_reload(path: str, map_file: Optional[str], version: str = "",
                   timeout: float = 60.0) -> Dict[str, Any]:
    """Ask the process serving `path` to take `map_file` (None: no map); its reply.
    ReloadFailed when it refuses or cannot be reached."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(timeout)
            conn.connect(path)
            request = {"map": None if map_file is None else str(Path(map_file).resolve()),
                       "version": version}
            conn.sendall(json.dumps(request).encode() + b"\n")
            reply = json.loads(_read_line(conn) or b"{}")
    except (OSError, ValueError) as e:
        raise ReloadFailed(f"no serving process answers on {path}: {e}") from e
    if not reply.get("ok"):
        raise ReloadFailed(str(reply.get("error") or "the process gave no reason"))
    return reply


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ripplekv.reload",
                                description="Apply hook: make a running process take a map.")
    p.add_argument("--socket", required=True, help="the process's ReloadServer socket")
    p.add_argument("--map", default=os.environ.get("RIPPLEKV_MAP_FILE", ""),
                   help="map file (default $RIPPLEKV_MAP_FILE)")
    p.add_argument("--version", default=os.environ.get("RIPPLEKV_MAP_VERSION"),
                   help="version written (default $RIPPLEKV_MAP_VERSION; empty: map removed)")
    p.add_argument("--timeout", type=float, default=60.0)
    args = p.parse_args(argv)
    removed = args.version == "" or not args.map
    try:
        reply = request_reload(args.socket, None if removed else args.map,
                               args.version or "", args.timeout)
    except ReloadFailed as e:
        print(f"ripplekv.reload: {e}", file=sys.stderr)
        return 1
    held = (f"map {reply['version'] or '(unversioned)'}: {reply['total_tokens']} tokens over "
            f"{reply['layers']} layers" if reply["layers"] else "no map (full cache)")
    print(f"ripplekv.reload: the process holds {held}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

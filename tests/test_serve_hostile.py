"""`symi-memory serve` as operators behind proxies and hostile or sloppy clients use it: a real server on loopback."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
from test_serve import TOKEN, make_setup, running_server

pytest.importorskip("uvicorn")
pytest.importorskip("starlette")


@pytest.fixture
def setup(tmp_path: Path, workspace: Path) -> dict[str, Path]:
    return make_setup(tmp_path, workspace)


def test_the_bearer_scheme_is_case_insensitive_and_the_token_exact(setup: dict[str, Path]) -> None:
    """``Authorization: bearer <token>`` (the scheme is case-insensitive, RFC 9110) was refused 401."""
    with running_server(setup["state"], env={"SYMI_SERVE_TOKEN": f"  {TOKEN}  "}) as srv:
        for header in (f"Bearer {TOKEN}", f"bearer {TOKEN}", f"BEARER   {TOKEN}"):
            status, out = srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"},
                                      headers={"Authorization": header})
            assert status == 200 and out["results"], (header, status, out)
        for header in ("", "Bearer", f"Basic {TOKEN}", f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}",
                       f"Bearer {TOKEN.upper()}", f"Bearer{TOKEN}", f"{TOKEN}"):
            status, out = srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"},
                                      headers={"Authorization": header} if header else None)
            assert status == 401 and "results" not in out and TOKEN not in json.dumps(out), (header, status)
    assert TOKEN not in srv.log.read_text()


def test_a_blank_configured_token_is_unset_and_the_environment_s_applies(setup: dict[str, Path]) -> None:
    """``serve.token = "  "`` (blank: unset) hid ``$SYMI_SERVE_TOKEN``: the server ran with no token at all."""
    cfg = setup["state"] / "symi.toml"
    cfg.write_text(cfg.read_text() + '\n[serve]\ntoken = "   "\n')
    with running_server(setup["state"], env={"SYMI_SERVE_TOKEN": TOKEN}) as srv:
        status, out = srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"})
        assert status == 401 and "results" not in out, (status, out)
        status, out = srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"},
                                  headers={"Authorization": f"Bearer {TOKEN}"})
        assert status == 200 and out["results"], (status, out)


def test_a_tokenless_server_reached_through_a_proxy_from_elsewhere_says_so_once(setup: dict[str, Path]) -> None:
    """A reverse proxy others can reach makes a loopback-bound server theirs: it said nothing. Now the first request
    forwarded for a client that is not loopback logs one warning naming the fix; loopback clients log none."""
    with running_server(setup["state"]) as srv:
        local = {"X-Forwarded-For": "127.0.0.1, ::1", "Forwarded": 'for="[::1]:5000";proto=https'}
        status, out = srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"}, headers=local)
        assert status == 200 and out["results"]
        assert "through a proxy" not in srv.log.read_text()
        for headers in ({"X-Forwarded-For": "127.0.0.1, 203.0.113.9"}, {"Forwarded": "for=198.51.100.7:443"},
                        {"X-Real-IP": "192.0.2.1"}):
            status, out = srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"}, headers=headers)
            assert status == 200 and out["results"]  # not refused: the proxy may authenticate its clients
        log = srv.log.read_text()
    assert log.count("through a proxy") == 1 and "203.0.113.9" in log and "serve.token" in log, log
    with running_server(setup["state"], env={"SYMI_SERVE_TOKEN": TOKEN}) as srv:
        status, _ = srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"},
                                headers={"X-Forwarded-For": "203.0.113.9", "Authorization": f"Bearer {TOKEN}"})
        assert status == 200
    assert "through a proxy" not in srv.log.read_text()


def _ask_without_reading(port: int, body: bytes, *, rcvbuf: int | None = 4096) -> socket.socket:
    s = socket.socket()
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)  # a client that takes what it is sent slowly
    s.connect(("127.0.0.1", port))
    s.sendall(b"POST /api/agents/main/get HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n%s" % (port, len(body), body))
    return s


def _read_all(s: socket.socket, *, pause: float = 0.0, chunk: int = 65536) -> bytes:
    s.settimeout(30)
    out = b""
    try:
        while data := s.recv(chunk):
            out += data
            if b"\r\n\r\n" in out:
                head, _, rest = out.partition(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                if len(rest) >= length:
                    break
            time.sleep(pause)
    except ConnectionResetError:
        pass
    return out


def test_a_client_that_asks_for_a_large_answer_and_never_reads_it_is_cut_off(setup: dict[str, Path]) -> None:
    """A client asking for a large note and reading none of it held its connection and the part of the answer the
    kernel's buffers do not take (Linux takes up to 4 MB, macOS far less) for ever: the server's memory grew by
    that much per such client, without limit. Now the client is cut off (the connection reset) once it has read
    under 1 KiB/s for serve.clientTimeoutSeconds; a client reading steadily gets all of its answer."""
    big = "".join(f"- line {i} {'x' * 80}\n" for i in range(90_000))  # 8 MB: more than the kernel takes
    cfg = setup["state"] / "symi.toml"
    cfg.write_text(cfg.read_text() + "\n[serve]\nclientTimeoutSeconds = 1\nmaxResponseBytes = 16000000\n"
                   "[agents.defaults.memorySearch.sync]\nmaxFileBytes = 1000000\n")  # the sync skips it: quicker
    body = json.dumps({"path": "memory/big.md"}).encode()
    with running_server(setup["state"]) as srv:
        deadline = time.monotonic() + 60
        while srv.request("POST", "/api/agents/main/search", {"query": "tea"})[0] != 200:  # its first index built
            assert time.monotonic() < deadline
        (setup["main"] / "memory" / "big.md").write_text(big, encoding="utf-8")
        stalled = _ask_without_reading(srv.port, body)
        steady = _ask_without_reading(srv.port, body, rcvbuf=None)
        time.sleep(0.5)
        got_steady = _read_all(steady, pause=0.005)  # well over 1 KiB/s
        deadline = time.monotonic() + 30
        while "read under 1024 bytes/s" not in srv.log.read_text():  # cut off a second or two after its answer
            assert time.monotonic() < deadline, srv.log.read_text()[-3000:]
            time.sleep(0.1)
        got_stalled = _read_all(stalled)
        stalled.close()
        steady.close()
        log = srv.log.read_text()
    assert got_steady.count(b"line 89999 "), (len(got_steady), log[-3000:])
    answer = json.loads(got_steady.partition(b"\r\n\r\n")[2])
    assert answer["text"] == big, len(got_steady)
    assert len(got_stalled) < len(got_steady) * 0.9, (len(got_stalled), len(got_steady))
    assert "read under 1024 bytes/s of its answer" in log, log


def test_a_refused_request_s_path_is_logged_with_its_control_characters_escaped(setup: dict[str, Path]) -> None:
    """Whoever can reach the port, token or not, chose the path logged for a refused request: URL-decoded, an
    escape sequence in it (``/%1b]0;...%07``) reached the operator's terminal as it was."""
    with running_server(setup["state"], env={"SYMI_SERVE_TOKEN": TOKEN}) as srv:
        status, _ = srv.request("GET", "/api/agents/main/status%1b]0;pwned%07%1b%5b2J")
        assert status == 401
        status, _ = srv.request("GET", "/x%1b%5b31m", headers={"Origin": "http://elsewhere.example"})
        assert status == 403
        status, _ = srv.request("GET", "/y%1b%5b31m", headers={"Host": "elsewhere.example"})
        assert status == 421
        status, out = srv.request("GET", "/api/agents/main/status", headers={"Authorization": f"Bearer {TOKEN}"})
        assert status == 200, out
    log = srv.log.read_text(encoding="utf-8", errors="replace")
    assert "status\\x1b]0;pwned\\x07\\x1b[2J: missing or wrong token" in log, log
    assert "/x\\x1b[31m" in log and "/y\\x1b[31m" in log, log
    assert "\x1b" not in log and "\x07" not in log

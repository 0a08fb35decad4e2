"""Running commands: JSON answers and server-sent event streams."""
import base64
import threading

from conftest import exec_json, exec_sse


def test_exec_json_stdout(api, sandbox):
    res = exec_json(api, sandbox["id"], ["sh", "-c", "echo hi"])
    assert res["exit_code"] == 0
    assert res["stdout"] == "hi\n"
    assert res["stderr"] == ""
    assert isinstance(res["duration_ms"], int) and res["duration_ms"] >= 0


def test_exec_json_stderr_and_exit_code(api, sandbox):
    res = exec_json(api, sandbox["id"],
                    ["sh", "-c", "echo out; echo err >&2; exit 7"])
    assert res["exit_code"] == 7
    assert res["stdout"] == "out\n"
    assert res["stderr"] == "err\n"


def test_exec_env_cwd_stdin(api, sandbox):
    res = exec_json(api, sandbox["id"],
                    ["sh", "-c", 'echo "$GREETING"; pwd; cat'],
                    env={"GREETING": "hello world"}, cwd="/tmp",
                    stdin="line one\nline two\n")
    assert res["exit_code"] == 0
    assert res["stdout"] == "hello world\n/tmp\nline one\nline two\n"


def test_exec_without_stdin_sees_eof(api, sandbox):
    res = exec_json(api, sandbox["id"], ["sh", "-c", "cat; echo done"])
    assert res["stdout"] == "done\n"


def test_exec_missing_program(api, sandbox):
    r = api.post(f"{api.base}/v1/sandboxes/{sandbox['id']}/exec",
                 json={"cmd": ["/no/such/program"]},
                 headers={"Accept": "application/json"}, timeout=(5, 60))
    # Either an API error or a failed process, never a success.
    if r.status_code == 200:
        assert r.json()["exit_code"] != 0
    else:
        assert 400 <= r.status_code < 500
        assert "error" in r.json()


def test_sandbox_env_reaches_commands(api, sandboxes):
    sb = sandboxes.create(env={"FROM_CREATE": "yes", "OVERRIDE": "create"})
    res = exec_json(api, sb["id"],
                    ["sh", "-c", 'echo "$FROM_CREATE $OVERRIDE"'],
                    env={"OVERRIDE": "exec"})
    assert res["stdout"] == "yes exec\n"


def test_exec_large_output(api, sandbox):
    res = exec_json(api, sandbox["id"],
                    ["sh", "-c", "yes 0123456789abcdef | head -c 3000000"])
    assert res["exit_code"] == 0
    assert len(res["stdout"]) == 3000000
    assert res["stdout"].startswith("0123456789abcdef\n")


def test_exec_sse_event_order(api, sandbox):
    ev = exec_sse(api, sandbox["id"],
                  ["sh", "-c", "echo one; echo two >&2; echo three; exit 3"])
    names = [e.name for e in ev]
    assert names[0] == "start", ev
    assert names[-1] == "exit", ev
    assert isinstance(ev[0].data["pid"], int) and ev[0].data["pid"] > 0
    assert ev[-1].data["exit_code"] == 3
    out = "".join(e.data["data"] for e in ev if e.name == "stdout")
    err = "".join(e.data["data"] for e in ev if e.name == "stderr")
    assert out == "one\nthree\n"
    assert err == "two\n"
    assert set(names) <= {"start", "stdout", "stderr", "exit"}


def test_exec_sse_streams_as_produced(api, sandbox):
    ev = exec_sse(api, sandbox["id"],
                  ["sh", "-c", "echo a; sleep 2; echo b"])
    outs = [e for e in ev if e.name == "stdout"]
    exit_ev = ev[-1]
    assert exit_ev.name == "exit" and exit_ev.data["exit_code"] == 0
    assert "".join(e.data["data"] for e in outs) == "a\nb\n"
    first = outs[0]
    assert first.data["data"].startswith("a")
    # "a" must reach the client while the command still sleeps, not
    # together with the end of the stream.
    assert exit_ev.t - first.t >= 1.0, ev


def test_exec_timeout_kills_sse(api, sandbox):
    ev = exec_sse(api, sandbox["id"],
                  ["sh", "-c", "echo started; sleep 30; echo never"],
                  timeout=1)
    assert ev[-1].name == "exit", ev
    assert ev[-1].data.get("signal") == "SIGKILL", ev[-1].data
    assert "exit_code" not in ev[-1].data or ev[-1].data["exit_code"] != 0
    out = "".join(e.data["data"] for e in ev if e.name == "stdout")
    assert out == "started\n"


def test_exec_timeout_kills_json(api, sandbox):
    res = exec_json(api, sandbox["id"], ["sleep", "30"], timeout=1)
    assert res.get("signal") == "SIGKILL" or res.get("timed_out") is True, res
    assert res.get("exit_code") != 0


def test_two_concurrent_streams(api, sandbox):
    results = {}

    def run(tag):
        results[tag] = exec_sse(
            api, sandbox["id"],
            ["sh", "-c", f"for i in 1 2 3; do echo {tag}$i; sleep 1; done"])

    threads = [threading.Thread(target=run, args=(t,)) for t in ("x", "y")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert set(results) == {"x", "y"}
    for tag, ev in results.items():
        out = "".join(e.data["data"] for e in ev if e.name == "stdout")
        assert out == f"{tag}1\n{tag}2\n{tag}3\n"
        assert ev[0].name == "start" and ev[-1].name == "exit"
        assert ev[-1].data["exit_code"] == 0
    x, y = results["x"], results["y"]
    # Both ran at the same time: each started before the other ended.
    assert x[0].t < y[-1].t and y[0].t < x[-1].t


def test_non_utf8_output_is_base64(api, sandbox):
    ev = exec_sse(api, sandbox["id"],
                  ["sh", "-c", r"printf '\377\376ok\n'"])
    chunks = [e for e in ev if e.name == "stdout"]
    assert chunks
    raw = b""
    for e in chunks:
        if "data_b64" in e.data:
            raw += base64.b64decode(e.data["data_b64"])
        else:
            raw += e.data["data"].encode()
    assert raw == b"\xff\xfeok\n"
    assert any("data_b64" in e.data for e in chunks)


def test_utf8_output_stays_text(api, sandbox):
    ev = exec_sse(api, sandbox["id"], ["sh", "-c", "printf 'h\\303\\251\\n'"])
    out = [e for e in ev if e.name == "stdout"]
    assert "".join(e.data["data"] for e in out) == "hé\n"

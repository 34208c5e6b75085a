#!/usr/bin/env python3
"""Stored responses belong to the API key that made them, and ids are unguessable (issue 34, item 10).

Usage: serve_response_owners_test.py GANTRY_BINARY MODELS_DIR   (run by tests/scripts/serve_response_owners.sh)

`gantry serve` runs with an --api-key-file of two keys. A response stored with key A is, for key B, exactly
as absent as one never made: GET and DELETE /v1/responses/{id} and previous_response_id answer 404 (with
the same body as for an id never made), and A can still read, continue and delete it afterwards. Every id
the server hands out (chatcmpl-, cmpl-, resp_, msg_ on both APIs) carries at least 128 random bits after
its prefix (32 hex digits or 24 base62 characters) and no two are alike.

Bounded: every socket has a timeout (serve_process.SOCKET_TIMEOUT), loops have counts, and the server is
killed on exit.
"""
import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_process import Server  # noqa: E402

MODEL = "tiny-llama"
KEY_A = "owners-test-key-a-0123456789abcdef"
KEY_B = "owners-test-key-b-fedcba9876543210"
HEX128 = r"[0-9a-f]{32}"
B62_142 = r"[A-Za-z0-9]{24}"


def main():
    gantry, models = sys.argv[1], sys.argv[2]
    keydir = tempfile.mkdtemp(prefix="gantry-owners-")
    keyfile = os.path.join(keydir, "keys")
    with open(keyfile, "w") as f:
        f.write(f"# two clients\n{KEY_A}\n  {KEY_B}  # the second\n")
    server = Server(gantry, [os.path.join(models, MODEL + ".gguf"), "--api-key-file", keyfile, "--ctx", "256",
                             "--parallel", "1", "--threads", "1", "--grpc-port", "-1"])
    failures = []

    def check(cond, msg):
        if not cond:
            print("FAIL:", msg, flush=True)
            failures.append(msg)

    def call(method, path, key, body=None):
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        if body is not None:
            headers["Content-Type"] = "application/json"
            body = json.dumps(body).encode()
        status, _, payload = server.request(method, path, body, headers)
        try:
            return status, json.loads(payload)
        except ValueError:
            return status, payload

    try:
        create = {"model": MODEL, "input": "hello", "max_output_tokens": 2}
        status, made = call("POST", "/v1/responses", KEY_A, create)
        if status != 200:
            raise RuntimeError(f"POST /v1/responses with key A answered {status}: {made}")
        rid = made["id"]
        check(re.fullmatch("resp_" + HEX128, rid), f"response id {rid!r} is not resp_ + 32 hex digits")
        path = f"/v1/responses/{rid}"
        never = "resp_" + "0" * 32
        status_never, body_never = call("GET", f"/v1/responses/{never}", KEY_A)
        check(status_never == 404, f"GET of an id never made answered {status_never}")

        # Key B: as absent as an id never made (the same answer but for the id it names).
        status, body = call("GET", path, KEY_B)
        check(status == 404, f"GET with key B answered {status}: {body}")
        check(json.dumps(body).replace(rid, never) == json.dumps(body_never),
              f"GET with key B says more than a miss: {body} vs {body_never}")
        status, body = call("DELETE", path, KEY_B)
        check(status == 404, f"DELETE with key B answered {status}: {body}")
        status, body = call("POST", "/v1/responses", KEY_B, {**create, "previous_response_id": rid})
        check(status == 404, f"previous_response_id with key B answered {status}: {body}")
        check("previous_response_not_found" in json.dumps(body), f"previous_response_id with key B: {body}")
        status, body = call("GET", path, None)
        check(status == 401, f"GET without a key answered {status}")

        # Key A still has it, whole.
        status, body = call("GET", path, KEY_A)
        check(status == 200 and body.get("id") == rid, f"GET with key A answered {status}: {body}")
        status, cont = call("POST", "/v1/responses", KEY_A, {**create, "previous_response_id": rid})
        check(status == 200, f"previous_response_id with key A answered {status}: {cont}")
        if status != 200:
            cont = None
        status, body = call("DELETE", path, KEY_A)
        check(status == 200 and body.get("deleted") is True, f"DELETE with key A answered {status}: {body}")
        status, body = call("GET", path, KEY_A)
        check(status == 404, f"GET with key A after its DELETE answered {status}")
        if cont:
            call("DELETE", f"/v1/responses/{cont['id']}", KEY_A)

        # Ids: their formats, and no two alike.
        ids = [rid]
        if cont:
            ids.append(cont["id"])
            ids += [item["id"] for item in cont.get("output", [])]
        msgs = [{"role": "user", "content": "hi"}]
        for i in range(3):
            key = KEY_A if i % 2 == 0 else KEY_B
            status, body = call("POST", "/v1/chat/completions", key, {"model": MODEL, "messages": msgs, "max_tokens": 1})
            check(status == 200 and re.fullmatch("chatcmpl-" + HEX128, body.get("id", "")),
                  f"chat completion: {status} {body}")
            ids.append(body.get("id"))
            status, body = call("POST", "/v1/completions", key, {"model": MODEL, "prompt": "hi", "max_tokens": 1})
            check(status == 200 and re.fullmatch("cmpl-" + HEX128, body.get("id", "")), f"completion: {status} {body}")
            ids.append(body.get("id"))
            status, body = call("POST", "/v1/messages", key, {"model": MODEL, "messages": msgs, "max_tokens": 1})
            check(status == 200 and re.fullmatch("msg_" + B62_142, body.get("id", "")), f"message: {status} {body}")
            ids.append(body.get("id"))
            status, body = call("POST", "/v1/responses", key, {**create, "store": False})
            check(status == 200 and re.fullmatch("resp_" + HEX128, body.get("id", "")), f"response: {status} {body}")
            ids.append(body.get("id"))
            for item in body.get("output", []):
                check(re.fullmatch(r"(msg|rs|fc)_" + HEX128, item.get("id", "")), f"output item id {item.get('id')!r}")
                ids.append(item.get("id"))
        check(len(set(ids)) == len(ids), f"ids repeat: {ids}")
        print(f"{len(ids)} ids, all distinct: {ids[:4]} ...", flush=True)
        if not server.alive():
            check(False, f"gantry serve exited {server.proc.returncode}")
    finally:
        server.kill()
    if failures:
        print(server.stderr()[-2000:])
        return 1
    print("serve_response_owners: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

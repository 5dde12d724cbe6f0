"""Typed properties and selectors from the command line: --property KEY:TYPE=VALUE,
typed .jsonl properties, what reads show of them, and --selector on pop, peek,
receive (also with --max) and in the shell."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_results import as_json, ok

from helpers.names import Unique

Courier = Any  # conftest.CourierCLI


def test_typed_property_options_arrive_typed_and_reads_show_their_types(
    courier: Courier, unique: Unique
) -> None:
    me, queue = unique("typed"), unique("jobs")
    ok(courier("register", me))
    ok(courier("queue", "create", queue, "--as", me))
    ok(courier("send", queue, "typed", "--property", "n:int=-5", "--property", "x:float=2.5",
               "--property", "ok:bool=TRUE", "--property", "t:text=5", "--property", "a:b=c",
               "--as", me))  # fmt: skip
    peeked = as_json(courier("peek", queue, "--as", me, "--json"))
    assert peeked["properties"] == {"n": -5, "x": 2.5, "ok": True, "t": "5", "a:b": "c"}
    kinds = {key: type(value) for key, value in peeked["properties"].items()}
    assert kinds == {"n": int, "x": float, "ok": bool, "t": str, "a:b": str}
    shown = ok(courier("pop", queue, "--as", me)).stdout  # in the database's key order
    for said in ("n:int=-5", "x:float=2.5", "ok:bool=true", "t=5", "a:b=c"):
        assert said in shown.split("properties: ", 1)[1].splitlines()[0].split(", ")


def test_a_bad_typed_property_is_refused_before_connecting(courier: Courier) -> None:
    nowhere = ("--servers", "127.0.0.1:1")
    for option, said in (("n:int=five", "'five' is not a int"),
                         ("n:int=9223372036854775808", "outside the 64-bit range"),
                         ("x:float=nan", "not finite"),
                         ("b:bool=yes", "'yes' is not a bool")):  # fmt: skip
        refused = courier("send", "q", "body", "--property", option, *nowhere, with_servers=False)
        assert refused.returncode == 2 and said in refused.stderr, refused.stderr


def test_jsonl_lines_carry_typed_properties(
    courier: Courier, unique: Unique, tmp_path: Path
) -> None:
    me, queue = unique("bulk-typed"), unique("jobs")
    ok(courier("register", me))
    ok(courier("queue", "create", queue, "--as", me))
    source = tmp_path / "messages.jsonl"
    lines = [{"body": "a", "properties": {"n": 1, "x": 1.0, "ok": False, "t": "1"}}]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    ok(courier("send", queue, "--file", str(source), "--as", me))
    (taken,) = as_json(courier("receive", queue, "--max", "10", "--as", me, "--json"))
    assert sorted((k, type(v).__name__, v) for k, v in taken["properties"].items()) == [
        ("n", "int", 1), ("ok", "bool", False), ("t", "str", "1"), ("x", "float", 1.0),
    ]  # fmt: skip


def test_selector_options_take_only_matching_messages(courier: Courier, unique: Unique) -> None:
    me, queue = unique("selective"), unique("jobs")
    ok(courier("register", me))
    ok(courier("queue", "create", queue, "--as", me))
    for n, kind in enumerate(["invoice", "order", "order", "invoice", "order"]):
        ok(courier("send", queue, f"{kind}-{n}", "--property", f"kind={kind}",
                   "--property", f"n:int={n}", "--as", me))  # fmt: skip
    peeked = as_json(courier("peek", queue, "--selector", "kind = 'order'", "--as", me, "--json"))
    popped = as_json(courier("pop", queue, "--selector", "n >= 2 AND kind = 'order'", "--as", me,
                             "--json"))  # fmt: skip
    received = as_json(courier("receive", queue, "--timeout", "5", "--selector",
                               "kind IN ('invoice') AND n > 0", "--as", me, "--json"))  # fmt: skip
    many = as_json(courier("receive", queue, "--max", "10", "--selector", "kind <> 'invoice'",
                           "--as", me, "--json"))  # fmt: skip
    assert (peeked["body"], popped["body"], received["body"]) == ("order-1", "order-2", "invoice-3")
    assert [m["body"] for m in many] == ["order-1", "order-4"]
    none = courier("receive", queue, "--timeout", "0.2", "--selector", "n > 10", "--as", me)
    assert none.returncode == 6
    assert as_json(courier("pop", queue, "--as", me, "--json"))["body"] == "invoice-0"


def test_a_bad_selector_says_where_it_failed(courier: Courier, unique: Unique) -> None:
    me, queue = unique("bad-selector"), unique("jobs")
    ok(courier("register", me))
    ok(courier("queue", "create", queue, "--as", me))
    refused = courier("pop", queue, "--selector", "kind = 'order' AND", "--as", me)
    assert refused.returncode == 11, refused.stderr  # a BadRequest
    assert "bad selector: expected a property name at character 19" in refused.stderr


def test_the_shell_reads_with_a_selector(courier: Courier, unique: Unique) -> None:
    me, queue = unique("shell-selector"), unique("q")
    courier("register", me)
    script = [
        f"queue create {queue}",
        f"send {queue} first --property kind=a",
        f"send {queue} second --property kind=b --property n:int=2",
        f"pop {queue} --selector \"kind = 'b' AND n = 2\" --json",
        f"pop {queue} --selector \"kind = 'b'\"",
        "quit",
    ]
    result = courier("shell", "--as", me, input="\n".join(script) + "\n")
    assert result.returncode == 0, result.stderr
    taken = json.loads(next(line for line in result.stdout.splitlines() if line.startswith("{")))
    assert (taken["body"], taken["properties"]) == ("second", {"kind": "b", "n": 2})
    assert "error: no message" in result.stderr

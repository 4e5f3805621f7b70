"""chat_format: roles, system turn first, alternation, content, an assistant turn."""

from __future__ import annotations

from typing import Any

import pytest

FIELDS = {"messages": "messages", "id": "id"}


def S(content: Any = "You are helpful.") -> dict[str, Any]:
    return {"role": "system", "content": content}


def U(content: Any = "Hi") -> dict[str, Any]:
    return {"role": "user", "content": content}


def A(content: Any = "Hello!") -> dict[str, Any]:
    return {"role": "assistant", "content": content}


def T(content: Any = '{"temp": 21}') -> dict[str, Any]:
    return {"role": "tool", "content": content, "tool_call_id": "c1"}


CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [{"id": "c1", "type": "function",
                    "function": {"name": "weather", "arguments": "{}"}}],
}

VALID = [
    [S(), U(), A()],
    [U(), A()],
    [U(), A(), U("More?"), A("Sure.")],
    [S(), U("Weather?"), CALL, T(), A("It is 21.")],  # tool call with null content
    [U("Two cities?"), CALL, T(), T(), A("21 and 18.")],  # parallel tool results
    [U(), A(), T(), A()],  # a tool turn right after an assistant turn
]


def _records(convs: list[Any]) -> list[dict[str, Any]]:
    return [{"id": f"c{i}", "messages": c} for i, c in enumerate(convs)]


def _details(g) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for row, detail in g.findings().select("row", "detail").iter_rows():
        out.setdefault(row, []).append(detail)
    return out


def test_valid_conversations_are_not_flagged(gate):
    g = gate(_records(VALID), "chat_format", fields=FIELDS)
    assert g.result.status == "pass"
    assert g.findings().height == 0


def test_each_code_on_its_row(gate):
    convs = [
        [S(), U(), A()],  # 0: fine
        [U(), {"role": "bot", "content": "x"}, A()],  # 1
        [U(), S(), A()],  # 2
        [U(), U(), A()],  # 3
        [A(), U(), A()],  # 4
        [U(), A(""), U("  \n"), A()],  # 5
        [U()],  # 6
        [],  # 7
        [U(), {"content": "x"}, A()],  # 8
        [U(), A(), T(), U(), A()],  # 9: user after a tool turn
        [U(), A(None)],  # 10: no content, no tool calls
        [U(), T(), A()],  # 11: tool without an assistant call
    ]
    g = gate(_records(convs), "chat_format", fields=FIELDS)
    assert g.codes_by_row() == {
        1: {"unknown_role"},
        2: {"system_not_first"},
        3: {"not_alternating"},
        4: {"not_alternating"},
        5: {"empty_content"},
        6: {"no_assistant_turn"},
        7: {"empty_conversation"},
        8: {"missing_role"},
        9: {"not_alternating"},
        10: {"empty_content"},
        11: {"not_alternating"},
    }
    d = _details(g)
    assert d[1] == ["messages[1]: role 'bot' not in system, user, assistant, tool"]
    assert d[2] == ["messages[1]: system turn not first"]
    assert d[3] == ["messages[1]: 'user' after 'user' (expected 'assistant')"]
    assert d[4] == ["messages[0]: starts with 'assistant' (expected 'user')"]
    assert d[5] == ["messages[1]: content empty", "messages[2]: content whitespace only"]
    assert d[8] == ["messages[1]: no role"]
    assert d[9] == ["messages[3]: 'user' after 'tool' (expected 'tool' or 'assistant')"]
    assert d[10] == ["messages[1]: content missing or null"]
    assert d[11] == ["messages[1]: 'tool' after 'user' (expected 'assistant')"]


def test_shapes_that_are_not_conversations(gate):
    records = [
        {"id": "a", "messages": [U(), A()]},
        {"id": "b", "messages": "Hi there"},
        {"id": "c"},
        {"id": "d", "messages": None},
        {"id": "e", "messages": [U(), "oops", None, {"role": 5, "content": 3}, A()]},
        {"id": "f", "messages": {"role": "user", "content": "Hi"}},
    ]
    g = gate(records, "chat_format", fields=FIELDS)
    assert g.codes_by_row() == {
        1: {"not_a_list"},
        2: {"not_a_list"},
        3: {"not_a_list"},
        4: {"turn_not_object", "unknown_role", "content_not_string"},
        5: {"not_a_list"},
    }
    d = _details(g)
    assert d[1] == ["messages: expected a list of turns, got a string"]
    assert d[2] == ["messages: missing or null"]
    assert d[4] == [
        "messages[1]: a string is not an object with role and content",
        "messages[2]: null is not an object with role and content",
        "messages[3]: role 5 not in system, user, assistant, tool",
        "messages[3]: content is an integer, not a string",
    ]
    assert d[5] == ["messages: expected a list of turns, got an object"]


def test_content_as_a_list_of_parts_in_one_record(gate):
    # One record's content is a list of parts: the field has mixed types in the batch, so
    # the check reads Python values; the other records are judged as on the typed path.
    parts = [{"type": "text", "text": "Hi"}]
    convs = [[U(parts), A()], *VALID, [U(), U(), A()]]
    g = gate(_records(convs), "chat_format", fields=FIELDS)
    last = len(convs) - 1
    assert g.codes_by_row() == {0: {"content_not_string"}, last: {"not_alternating"}}
    assert _details(g)[0] == ["messages[0]: content is a list, not a string"]


def test_typed_and_python_paths_agree(gate):
    convs = [
        [S(), U(), A()],
        [U(), {"role": "bot", "content": "x"}, A()],
        [U(), S(), A("")],
        [A(), U(), U()],
        [U()],
        [],
        [U(), {"content": "x"}, A()],
        [U(), CALL, T(), U(), A()],
    ]
    typed = gate(_records(convs), "chat_format", fields=FIELDS)
    mixed = gate(_records([*convs, "not a list"]), "chat_format", fields=FIELDS)
    cols = ["row", "code", "detail"]
    expected = typed.findings().select(cols).rows()
    assert expected  # the conversations above are not all valid
    assert mixed.findings().select(cols).rows() == [
        *expected, (len(convs), "not_a_list", "messages: expected a list of turns, got a string")
    ]


def test_turn_level_content_that_is_not_text(gate):
    convs = [[U(), A(42)], [U(), A({"text": "x"})], [U(), A(["x"])], [U(), A()]]
    g = gate(_records(convs), "chat_format", fields=FIELDS)
    assert g.codes_by_row() == {0: {"content_not_string"}, 1: {"content_not_string"},
                                2: {"content_not_string"}}


def test_alternation_can_be_switched_off(gate):
    convs = [[U(), U(), A()], [A(), A()]]
    g = gate(_records(convs), "chat_format", fields=FIELDS, alternate=False)
    assert g.findings().height == 0


def test_assistant_requirements(gate):
    convs = [[U()], [U(), A()], [U(), A(), U()], [U(), CALL, T()]]
    g = gate(_records(convs), "chat_format", fields=FIELDS, require_assistant=False)
    assert g.findings().height == 0
    g = gate(_records(convs), "chat_format", fields=FIELDS, require_last_assistant=True)
    assert g.codes_by_row() == {
        0: {"no_assistant_turn", "last_turn_not_assistant"},
        2: {"last_turn_not_assistant"},
        3: {"last_turn_not_assistant"},
    }
    assert _details(g)[2] == ["messages[2]: last turn is 'user', not 'assistant'"]


def test_empty_content_can_be_allowed(gate):
    convs = [[S(""), U(), A(" ")], [U(), A(None)], [U(), {"role": "assistant"}]]
    g = gate(_records(convs), "chat_format", fields=FIELDS, allow_empty_content=True)
    assert g.findings().height == 0
    g = gate(_records(convs), "chat_format", fields=FIELDS)
    assert g.result.codes == {"empty_content": 4}


def test_custom_roles(gate):
    fn = {"role": "function", "content": "1"}
    convs = [
        [S(), U(), A()],  # 0: system not allowed
        [U(), A(), fn, A()],  # 1: an extra allowed role is a tool turn
        [U(), fn, A()],  # 2: ... so it cannot follow a user turn
        [U(), A(), T(), A()],  # 3: 'tool' is unknown here and left out: assistant twice
    ]
    g = gate(_records(convs), "chat_format", fields=FIELDS,
             roles=["user", "assistant", "function"])
    assert g.codes_by_row() == {
        0: {"unknown_role"},
        2: {"not_alternating"},
        3: {"unknown_role", "not_alternating"},
    }
    d = _details(g)
    assert d[0] == ["messages[0]: role 'system' not in user, assistant, function"]
    assert d[2] == ["messages[1]: 'function' after 'user' (expected 'assistant')"]
    assert d[3][1] == "messages[3]: 'assistant' after 'assistant' (expected 'user' or 'function')"


def test_roles_are_case_sensitive(gate):
    g = gate(_records([[{"role": "User", "content": "Hi"}, A()]]), "chat_format", fields=FIELDS)
    assert g.codes_by_row() == {0: {"unknown_role", "not_alternating"}}


def test_role_counts_in_stats(gate):
    g = gate(_records(VALID), "chat_format", fields=FIELDS)
    assert g.result.stats == {
        "conversations": 6,
        "turns": 23,
        "roles": {"assistant": 10, "user": 7, "tool": 4, "system": 2},
    }


def test_a_few_hundred_conversations(gate):
    convs: list[Any] = [VALID[i % len(VALID)] for i in range(300)]
    convs[123] = [U(), U(), A()]
    g = gate(_records(convs), "chat_format", fields=FIELDS)
    assert g.codes_by_row() == {123: {"not_alternating"}}


@pytest.mark.parametrize("fields", [{"text": "text", "id": "id"}])
def test_no_messages_field_is_an_error(gate, fields):
    g = gate(["some text"], "chat_format", fields=fields)
    assert g.result.status == "error"
    assert "fields.messages" in (g.result.message or "")


def test_messages_field_absent_from_the_data_is_an_error(gate):
    g = gate(_records([[U(), A()]]), "chat_format", fields={"messages": "chat", "id": "id"})
    assert g.result.status == "error"
    assert "chat" in (g.result.message or "")

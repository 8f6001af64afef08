"""Reading model answers: the JSON envelope, fenced code, and the ways models get them wrong."""

from __future__ import annotations

import json

import pytest

from codemode.agent.actions import Execute, Finish, Malformed, Search
from codemode.agent.parsing import MAX_REPLY_CHARS, parse_envelope, parse_fenced

CODE = "import csv\nrows = list(csv.DictReader(open('sales.csv')))\nprint(len(rows))"


def test_a_clean_envelope_gives_thoughts_and_code():
    text = json.dumps({"thoughts": "count the rows", "code": CODE})
    assert parse_envelope(text) == ("count the rows", Execute(CODE))


@pytest.mark.parametrize(
    "text",
    [
        f"Here is my answer:\n```json\n{json.dumps({'thoughts': 't', 'code': CODE})}\n```\nDone.",
        f"Sure. {json.dumps({'thoughts': 't', 'code': CODE})} Let me know!",
        # raw newlines inside the JSON string, as models often write them
        '{"thoughts": "t", "code": "' + CODE.replace("'", "'") + '"}',
        # the whole envelope as one JSON string
        json.dumps(json.dumps({"thoughts": "t", "code": CODE})),
        # code whose newlines arrived as backslash-n (escaped twice)
        '{"thoughts": "t", "code": ' + json.dumps(CODE.replace("\n", "\\n")) + "}",
        # the code fenced inside the JSON string
        json.dumps({"thoughts": "t", "code": f"```python\n{CODE}\n```"}),
    ],
    ids=["fenced-json", "prose-around", "raw-newlines", "json-string", "double-escaped", "fence"],
)
def test_the_envelope_survives_what_models_do_to_it(text):
    thoughts, action = parse_envelope(text)
    assert action == Execute(CODE)
    assert thoughts == "t"


def test_envelope_search_and_answer():
    assert parse_envelope('{"thoughts": "look", "search": "read a csv"}')[1] == Search("read a csv")
    assert parse_envelope('{"thoughts": "", "answer": "March"}')[1] == Finish("March")


def test_envelope_falls_back_to_fenced_code():
    assert parse_envelope(f"Plan.\n```python\n{CODE}\n```")[1] == Execute(CODE)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("I will now count the rows.", "no JSON object found"),
        ('{"thoughts": "hmm"}', 'no "code", "search" or "answer"'),
        ('{"thoughts": "t", "code": ""}', '"code" is empty'),
        ('{"thoughts": "t", "code": ["print(1)"]}', '"code" must be a string'),
        ("{" * 5000, "no JSON object found"),
        ("x" * (MAX_REPLY_CHARS + 1), "characters"),
    ],
)
def test_unusable_envelopes_are_malformed_with_a_reason(text, problem):
    _, action = parse_envelope(text)
    assert isinstance(action, Malformed)
    assert problem in action.problem
    assert "\n" not in action.problem


def test_fenced_code_with_plan_before_it():
    thoughts, action = parse_fenced(f"Plan: read, total, write.\n\n```python\n{CODE}\n```\n")
    assert thoughts == "Plan: read, total, write."
    assert action == Execute(CODE)


def test_fenced_code_cut_off_at_the_end_still_runs():
    assert parse_fenced(f"```python\n{CODE}")[1] == Execute(CODE)


def test_several_python_blocks_run_together_and_output_blocks_are_ignored():
    text = "```python\nx = 1\n```\nexpected:\n```text\n1\n```\n```py\nprint(x)\n```"
    assert parse_fenced(text)[1] == Execute("x = 1\n\n\nprint(x)")


def test_fenced_search_and_final_answer():
    assert parse_fenced("```search\nread a csv file\n```")[1] == Search("read a csv file")
    assert parse_fenced("All done.\nFINAL ANSWER: March grew most")[1] == Finish("March grew most")
    assert parse_fenced("**Final Answer:** 42")[1] == Finish("42")


def test_code_wins_over_a_premature_final_answer():
    _, action = parse_fenced("```python\nprint(1)\n```\nFINAL ANSWER: 1")
    assert action == Execute("print(1)")


def test_code_indented_as_a_whole_is_dedented():
    assert parse_fenced("```python\n    x = 1\n    print(x)\n```")[1] == Execute("x = 1\nprint(x)")


def test_bare_code_without_a_fence_is_accepted():
    assert parse_fenced("import os\nprint(os.getcwd())")[1] == Execute(
        "import os\nprint(os.getcwd())"
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("I think the answer is in the data.", "no code found"),
        ("```bash\nls -la\n```", "only Python runs here"),
        ("", "no code found"),
    ],
)
def test_unusable_fenced_answers_are_malformed(text, problem):
    _, action = parse_fenced(text)
    assert isinstance(action, Malformed)
    assert problem in action.problem

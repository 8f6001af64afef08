"""The search benchmark's task sets: the held-out split is frozen, and every task is answerable."""

import hashlib
import json
from collections import Counter
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
# The held-out split was written before any measurement and must never be tuned on or edited:
# if this hash changes, the held-out numbers stop meaning anything. Add new tasks to dev instead.
HELDOUT_SHA256 = "ee9d97c70c4005bca296ffb9c523afa08b63b2b2d6fccb96f364dfc2cc565e79"


def load(name):
    return json.loads((BENCH / name).read_text())


def test_heldout_file_is_unchanged():
    digest = hashlib.sha256((BENCH / "search_heldout.json").read_bytes()).hexdigest()
    assert digest == HELDOUT_SHA256


def test_task_sets_are_big_half_paraphrased_and_multi_step():
    dev, heldout = load("search_dev.json"), load("search_heldout.json")
    assert (dev["split"], heldout["split"]) == ("dev", "heldout")
    tasks = dev["tasks"] + heldout["tasks"]
    assert len(tasks) >= 300
    styles = Counter(task["style"] for task in tasks)
    assert set(styles) == {"api", "paraphrase"}
    assert styles["paraphrase"] >= len(tasks) / 2
    assert sum(len(task["needs"]) > 1 for task in heldout["tasks"]) >= 10
    assert len({task["id"] for task in tasks}) == len(tasks)
    assert not {t["query"].lower() for t in dev["tasks"]} & {
        t["query"].lower() for t in heldout["tasks"]
    }


def test_every_expected_operation_exists(real_specs):
    operations = {key: {s.operation_id for s in specs} for key, specs in real_specs.items()}
    assert sum(len(ids) for ids in operations.values()) == 3224
    for name in ("search_dev.json", "search_heldout.json"):
        for task in load(name)["tasks"]:
            for group in task["needs"]:
                assert group, task["id"]
                missing = set(group) - operations[task["spec"]]
                assert not missing, (task["id"], missing)

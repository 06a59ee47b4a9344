#!/usr/bin/env python3
"""
The expected results of tau-bench's test tasks, computed by tau-bench's own Python tools: for each
task, its gold actions replayed on a fresh copy of the database as tau-bench's env does (a tool
error, returned or raised, is the observation "Error: ..."), and written as one JSON line with each
action's observation and a hash of the final database. The TypeScript port is checked against this
file (fixtures/tau-bench/<domain>/tasks/test.expected.jsonl, by src/eval/tau-bench.test.ts).

    python3 scripts/tau-bench-oracle.py <tau-bench folder> <domain> > fixtures/tau-bench/<domain>/tasks/test.expected.jsonl

<tau-bench folder> holds <domain>/data/*.json, <domain>/tasks_test.json and <domain>/reference-tools/
(the tools as tau-bench ships them). They are run, not copied: a stub of tau_bench.envs.tool is all
this script adds.
"""
import copy
import hashlib
import importlib
import importlib.util
import json
import os
import sys
import tempfile


def canonical(value):
    """JSON with sorted keys, and floats that are whole written as integers (JavaScript has one number type)."""
    def norm(v):
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        if isinstance(v, list):
            return [norm(x) for x in v]
        return v
    return json.dumps(norm(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def observation(text):
    """A tool's answer as the port returns it: parsed when it is a JSON object or array, else the text."""
    if isinstance(text, str) and text[:1] in "[{":
        return json.loads(text)
    return text


def main(root, domain):
    # The reference tools import tau_bench.envs.tool.Tool; give them a stub package.
    stub = tempfile.mkdtemp()
    os.makedirs(os.path.join(stub, "tau_bench", "envs"))
    for pkg in ["tau_bench", os.path.join("tau_bench", "envs")]:
        open(os.path.join(stub, pkg, "__init__.py"), "w").close()
    with open(os.path.join(stub, "tau_bench", "envs", "tool.py"), "w") as f:
        f.write("class Tool:\n    pass\n")
    sys.path.insert(0, stub)
    folder = os.path.join(root, domain, "reference-tools")
    spec = importlib.util.spec_from_file_location("reference_tools", os.path.join(folder, "__init__.py"), submodule_search_locations=[folder])
    pkg = importlib.util.module_from_spec(spec)
    sys.modules["reference_tools"] = pkg
    spec.loader.exec_module(pkg)
    tools = pkg.ALL_TOOLS
    by_name = {t.get_info()["function"]["name"]: t for t in tools}

    tables = sorted(f[:-5] for f in os.listdir(os.path.join(root, domain, "data")) if f.endswith(".json"))
    base = {t: json.load(open(os.path.join(root, domain, "data", t + ".json"))) for t in tables}
    tasks = json.load(open(os.path.join(root, domain, "tasks_test.json")))
    for task in tasks:
        data = copy.deepcopy(base)
        observations = []
        for action in task["actions"]:
            try:
                out = by_name[action["name"]].invoke(data=data, **copy.deepcopy(action["kwargs"]))
            except Exception as e:  # as tau-bench's env answers a tool that raises
                out = f"Error: {e}"
            observations.append(observation(out))
        print(json.dumps({
            "id": task["id"],
            "observations": observations,
            "final_state_sha256": hashlib.sha256(canonical(data).encode("utf-8")).hexdigest(),
        }, ensure_ascii=False))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

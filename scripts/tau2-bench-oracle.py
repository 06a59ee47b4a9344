#!/usr/bin/env python3
"""
What τ²-bench's own Python says about each task of a domain, for the TypeScript port to be checked
against (fixtures/tau2-bench/<domain>/tasks/base.expected.jsonl, read by tau2-bench.test.ts):

- the agent and user DB hashes once the task's initial state is set (initialization data merged,
  initialization actions run, message history replayed), as τ²'s `Environment.set_state` leaves them;
- every gold action's observation, as an agent sees it (`Environment.get_response`: the call, then
  `sync_tools`; an exception is `Error: <message>`), and the DB hashes after the last one;
- what τ²'s evaluators score the gold trajectory (the gold calls, then one assistant message saying the
  task's `communicate_info`) and a do-nothing one (no call, one empty message), per component.

    python3 scripts/tau2-bench-oracle.py <tau2-bench folder> <domain> > <domain>/tasks/base.expected.jsonl
    python3 scripts/tau2-bench-oracle.py <tau2-bench folder> <domain> --schemas > <domain>/tau2-schemas.json

<tau2-bench folder> holds <domain>/{db,tasks,…} and reference/ (τ²'s modules as shipped under
src/tau2). They are run, not copied: this script lays them out as a `tau2` package in a temporary
folder and adds stubs only for the modules the environment and the evaluators import but never use
on this path (audio, voice, configuration, the registry, `addict`). Needs pydantic, loguru, toml,
pyyaml, docstring-parser, deepdiff, pandas and python-dotenv.

With --schemas it prints instead the domain's tools as τ² gives them to a model (`Tool.openai_schema`)
with each tool's type, `mutates_state` and its return value's JSON Schema, for both sides, and the
JSON Schema of each side's DB model (the port's tau2-schemas.json). With --db, each side's DB as τ²
loads it (every field, defaults filled in; telecom's are TOML), as JSON: the port's initial state.
"""
import importlib
import importlib.abc
import importlib.machinery
import json
import os
import shutil
import sys
import tempfile
import types
from pathlib import Path

# Modules the environment and the evaluators import for what this path never touches.
SIMULATION_STUB = '''
from typing import Any, Optional
from pydantic import BaseModel, ConfigDict

class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)

class DBCheck(_Loose):
    db_match: bool
    db_reward: float

class EnvAssertionCheck(_Loose):
    met: bool
    reward: float

class ActionCheck(_Loose):
    action_match: bool
    action_reward: float

class CommunicateCheck(_Loose):
    info: str
    met: bool

class RewardInfo(_Loose):
    reward: float
    reward_breakdown: Optional[dict] = None
'''

ADDICT_STUB = '''
# addict.Dict's update merges nested dicts and replaces everything else: all τ² relies on.
class Dict(dict):
    def __init__(self, data=None):
        super().__init__()
        for k, v in (data or {}).items():
            self[k] = Dict(v) if isinstance(v, dict) and not isinstance(v, Dict) else v

    def update(self, other):
        for k, v in other.items():
            if isinstance(v, dict) and isinstance(self.get(k), dict):
                self[k].update(v)
            else:
                self[k] = Dict(v) if isinstance(v, dict) and not isinstance(v, Dict) else v

    def to_dict(self):
        return {k: v.to_dict() if isinstance(v, Dict) else v for k, v in self.items()}
'''

STUBBED = ("tau2.config", "tau2.registry", "tau2.orchestrator", "tau2.agent", "tau2.voice", "tau2.utils.llm_utils",
           "tau2.data_model.audio", "tau2.data_model.audio_effects", "tau2.data_model.persona", "tau2.data_model.usage",
           "tau2.data_model.voice")


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Any name imported from a stubbed module: a loose pydantic model for a class name, else a no-op."""

    def find_spec(self, name, path, target=None):
        if any(name == s or name.startswith(s + ".") for s in STUBBED):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        from enum import Enum
        from pydantic import BaseModel, ConfigDict

        def attr(name):
            if name.startswith("__"):
                raise AttributeError(name)
            if name == "CommunicationMode":
                return Enum("CommunicationMode", {"HALF_DUPLEX": "half_duplex", "FULL_DUPLEX": "full_duplex"})
            if name[:1].isupper() and not name.isupper():
                return type(name, (BaseModel,), {"model_config": ConfigDict(extra="allow", arbitrary_types_allowed=True)})
            if name.isupper():
                return None
            return lambda *a, **k: None

        module.__path__ = []
        module.__getattr__ = attr


def load_tau2(folder: Path) -> Path:
    """τ²'s reference modules laid out as the `tau2` package, with the data folder where τ² looks for it."""
    root = Path(tempfile.mkdtemp(prefix="tau2-oracle-"))
    pkg = root / "src" / "tau2"
    for part in ("environment", "data_model", "domains", "evaluator", "utils"):
        shutil.copytree(folder / "reference" / part, pkg / part)
    for sub in [pkg, *[p for p in pkg.rglob("*") if p.is_dir()]]:
        (sub / "__init__.py").touch()
    (pkg / "utils" / "__init__.py").write_text(
        "from .io_utils import *\nfrom .utils import *\nfrom .pydantic_utils import *\n"
    )
    (pkg / "data_model" / "simulation.py").write_text(SIMULATION_STUB)
    (root / "addict.py").write_text(ADDICT_STUB)
    data = root / "data" / "tau2" / "domains"
    data.mkdir(parents=True)
    for domain in ("mock", "airline", "retail", "telecom"):
        os.symlink(folder / domain, data / domain)
    os.environ["TAU2_DATA_DIR"] = str(root / "data")
    sys.path[:0] = [str(root / "src"), str(root)]
    sys.meta_path.insert(0, _StubFinder())
    from loguru import logger

    logger.remove()
    return root


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 2:
        sys.exit(__doc__)
    folder, domain = Path(args[0]).resolve(), args[1]
    root = load_tau2(folder)
    try:
        env_module = importlib.import_module(f"tau2.domains.{domain}.environment")
        if "--db" in sys.argv:
            env = env_module.get_environment()
            dbs = {"db": env.tools.db.model_dump(mode="json")}
            if env.user_tools is not None and env.user_tools.db is not None:
                dbs["user_db"] = env.user_tools.db.model_dump(mode="json")
            print(json.dumps(dbs, ensure_ascii=False))
        elif "--schemas" in sys.argv:
            print(json.dumps(schemas(env_module.get_environment(), domain), indent=1, ensure_ascii=False))
        else:
            run_tasks(env_module, folder / domain)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def schemas(env, domain: str) -> dict:
    from pydantic import TypeAdapter
    import inspect

    out = {
        "_about": f"Generated by scripts/tau2-bench-oracle.py {domain} --schemas from τ²-bench's own toolkits: each tool as τ² gives it to a model, its type, whether it changes the DB, and its return value's JSON Schema; and each side's DB model.",
        "tools": {},
    }
    for side, kit in (("assistant", env.tools), ("user", env.user_tools)):
        if kit is None:
            continue
        tools = []
        for name, tool in kit.get_tools().items():
            ret = inspect.signature(kit.tools[name]).return_annotation
            tools.append({
                "schema": tool.openai_schema,
                "tool_type": kit.tool_type(name).value,
                "mutates_state": kit.tool_mutates_state(name),
                "returns": TypeAdapter(ret).json_schema() if ret is not inspect.Signature.empty else None,
            })
        out["tools"][side] = tools
    out["db"] = type(env.tools.db).model_json_schema()
    if env.user_tools is not None and env.user_tools.db is not None:
        out["user_db"] = type(env.user_tools.db).model_json_schema()
    return out


def run_tasks(env_module, data: Path) -> None:
    from tau2.data_model.message import AssistantMessage, ToolCall, ToolMessage, UserMessage
    from tau2.data_model.tasks import RewardType, Task
    from tau2.evaluator.evaluator_action import ActionEvaluator
    from tau2.evaluator.evaluator_communicate import CommunicateEvaluator
    from tau2.evaluator.evaluator_env import EnvironmentEvaluator

    tasks_file = data / "tasks.json"
    tasks = [Task.model_validate(t) for t in json.loads(tasks_file.read_text())]
    make_env = env_module.get_environment

    def initial(task):
        s = task.initial_state
        return (s.initialization_data if s else None, s.initialization_actions if s else None, (s.message_history or []) if s else [])

    def score(task, trajectory):
        """τ²'s evaluate_simulation for a run that ended with AGENT_STOP, NL assertions left out."""
        out = {}
        try:
            env_info = EnvironmentEvaluator.calculate_reward(environment_constructor=make_env, task=task, full_trajectory=trajectory)
            act = ActionEvaluator.calculate_reward(task=task, full_trajectory=trajectory)
            com = CommunicateEvaluator.calculate_reward(task=task, full_trajectory=trajectory)
        except Exception as e:  # τ² cannot score this task
            return {"error": f"{type(e).__name__}: {e}"}
        if task.evaluation_criteria is None:
            return {"reward": 1.0, "breakdown": {}}
        basis = set(task.evaluation_criteria.reward_basis)
        # NL assertions need an LLM judge: left out of the reward here, and said so.
        unevaluated = basis - {RewardType.DB, RewardType.ENV_ASSERTION, RewardType.ACTION, RewardType.COMMUNICATE}
        if unevaluated:
            out["not_scored"] = sorted(b.value for b in unevaluated)
        reward = 1.0
        # As evaluate_simulation combines them: each evaluator's reward once, its breakdown merged.
        for kinds, info in (({RewardType.DB, RewardType.ENV_ASSERTION}, env_info), ({RewardType.ACTION}, act), ({RewardType.COMMUNICATE}, com)):
            if basis & kinds:
                out.update({k.value if hasattr(k, "value") else k: v for k, v in (info.reward_breakdown or {}).items()})
                reward *= info.reward
        breakdown = {k: v for k, v in out.items() if k != "not_scored"}
        return {"reward": reward, "breakdown": breakdown, **({"not_scored": out["not_scored"]} if "not_scored" in out else {})}

    for task in tasks:
        data_init, actions_init, history = initial(task)
        env = make_env()
        env.set_state(initialization_data=data_init, initialization_actions=actions_init, message_history=history)
        line = {"id": task.id, "initial_db_hash": env.get_db_hash(), "initial_user_db_hash": env.get_user_db_hash(), "observations": []}
        trajectory = list(history)
        gold = (task.evaluation_criteria.actions if task.evaluation_criteria else None) or []
        for i, action in enumerate(gold):
            call = ToolCall(id=f"gold_{i}", name=action.name, arguments=action.arguments, requestor=action.requestor)
            response = env.get_response(call)
            line["observations"].append({"content": response.content, "error": response.error})
            message_type = UserMessage if action.requestor == "user" else AssistantMessage
            trajectory.append(message_type(role=action.requestor, tool_calls=[call]))
            trajectory.append(response)
        line["db_hash"] = env.get_db_hash()
        line["user_db_hash"] = env.get_user_db_hash()
        said = " ".join((task.evaluation_criteria.communicate_info or []) if task.evaluation_criteria else [])
        trajectory.append(AssistantMessage(role="assistant", content=said or "Done."))
        line["gold"] = score(task, trajectory)
        line["nothing"] = score(task, [*history, AssistantMessage(role="assistant", content="Done.")])
        print(json.dumps(line))


if __name__ == "__main__":
    main()

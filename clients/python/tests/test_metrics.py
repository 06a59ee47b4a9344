"""`agent serve`'s GET /metrics, read by Prometheus's own Python client parser: open (no token) and counting the steps served."""
from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from agentic_rl import SyncEnv


def test_metrics_parse_and_count_the_steps_served(weather) -> None:
    with SyncEnv(weather.url) as env:
        env.reset(seed=1)
        env.step("get_weather", {"city": "Paris"})
    weather.wait_idle()
    text = urllib.request.urlopen(f"{weather.url}/metrics").read().decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["agent_tool_call_duration_seconds"].type == "histogram"
    steps = sum(s.value for s in families["agent_steps"].samples if s.name == "agent_steps_total")
    assert steps >= 1
    assert families["agent_serve_sessions"].samples[0].value == 0

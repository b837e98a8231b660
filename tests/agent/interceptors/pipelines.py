"""Compiling one interceptor inside a minimal pipelines.yaml, for the interceptors'
validation tests: the errors as `logflume agent validate` prints them."""

import textwrap

import tests.agent.fakes  # noqa: F401 - registers test-gen and test-collect
from agent.config import compile_text

TEMPLATE = """\
agents:
  a:
    sources:
      s:
        type: test-gen
        channels: [c]
        interceptors:
          - type: nginx
{interceptor}
    channels:
      c: {{type: memory}}
    sinks:
      k: {{type: test-collect, channel: c}}
"""
FIRST_LINE = 9  # the line of the interceptor's `- type:`
WHERE = "agents.a.sources.s.interceptors[1]"


def compile_interceptor(interceptor: str, environ=None):
    """(the interceptor's config or None, the errors as strings): `interceptor` is its
    YAML mapping (`type: ...` and its keys), one key per line, placed second in a
    source's list after the nginx parser, from line FIRST_LINE of the file."""
    block = textwrap.indent(textwrap.dedent(interceptor).strip("\n"), " " * 12)
    block = " " * 10 + "- " + block.lstrip()
    text = TEMPLATE.format(interceptor=block)
    agents, errors = compile_text(text, "pipelines.yaml", environ or {})
    config = agents["a"].sources["s"].interceptors[1].config if agents else None
    return config, [str(e) for e in errors]

"""codemode's own agent loop: a model plans, writes code, the sandbox runs it, the structured
result goes back, the model fixes its code; and a tool-calling baseline in the same harness.

    from codemode.agent import Agent, make_provider
    async with Codemode(config) as engine:
        record = await Agent(engine, make_provider("openai:gpt-4o-mini")).run("...")
"""

from codemode.agent.agent import Agent
from codemode.agent.baseline import ToolCallingAgent
from codemode.agent.formats import FencedCode, JsonEnvelope, NativeTools, OutputFormat
from codemode.agent.loop import Approval, Approver, RunObserver, deny_all
from codemode.agent.providers import (
    Message,
    ModelProvider,
    ModelReply,
    ModelRequest,
    RecordingModel,
    ReplayModel,
    ScriptedModel,
    ToolCallRequest,
    ToolDefinition,
    make_provider,
)
from codemode.agent.record import ApprovalRecord, Round, RunRecord, RunStatus, Step
from codemode.settings.agent import AgentSettings, ModelSettings, parse_model_ref

__all__ = [
    "Agent",
    "AgentSettings",
    "Approval",
    "ApprovalRecord",
    "Approver",
    "FencedCode",
    "JsonEnvelope",
    "Message",
    "ModelProvider",
    "ModelReply",
    "ModelRequest",
    "ModelSettings",
    "NativeTools",
    "OutputFormat",
    "RecordingModel",
    "ReplayModel",
    "Round",
    "RunObserver",
    "RunRecord",
    "RunStatus",
    "ScriptedModel",
    "Step",
    "ToolCallRequest",
    "ToolCallingAgent",
    "ToolDefinition",
    "deny_all",
    "make_provider",
    "parse_model_ref",
]

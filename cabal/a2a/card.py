"""The Agent Card: what a caller reads about the served team before it sends anything."""

from __future__ import annotations

from a2a.types import (AgentCapabilities, AgentCard, AgentInterface, AgentSkill, HTTPAuthSecurityScheme,
                       SecurityRequirement, SecurityScheme, StringList)
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, TransportProtocol

from cabal import __version__
from cabal.rounds.mission import MissionSpec

BEARER = "bearer"


def agent_card(spec: MissionSpec, url: str, *, token: bool) -> AgentCard:
    """The team of ``spec`` (the served mission file) at ``url``; ``token``: the server asks for
    its token as an HTTP bearer token (it listens beyond this machine)."""
    operatives = spec.team.counted_operatives
    names = [spec.team.names.get(f"operative-{n}", f"operative-{n}") for n in range(1, operatives + 1)]
    description = (f"A Cabal team: a Chair who plans and decides, {operatives} operative(s) ({', '.join(names)}) who "
                   "write, a Watchdog who inspects each version against its definition of done, and an Envoy who "
                   f"reports. Send a request: the team works on it for up to {spec.rounds} round(s) and returns the "
                   "products it accepted as the task's artifacts. When the Chair asks you something the task is "
                   "input-required: answer with a message on the same task.")
    skill = AgentSkill(id="mission", name=spec.name or "mission",
                       description="Plan, write, review and deliver the products a request needs, as a team.",
                       tags=["planning", "writing", "review", "multi-agent"],
                       examples=[spec.request] if spec.request else [],
                       input_modes=["text/plain"], output_modes=["text/markdown"])
    card = AgentCard(
        name=f"Cabal team: {spec.name or 'mission'}", description=description, version=__version__,
        supported_interfaces=[AgentInterface(url=url, protocol_binding=TransportProtocol.JSONRPC.value,
                                             protocol_version=PROTOCOL_VERSION_CURRENT)],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"], default_output_modes=["text/markdown", "text/plain"], skills=[skill])
    if token:
        card.security_schemes[BEARER].CopyFrom(SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(
            scheme="Bearer", description="the token `cabal a2a` printed when it started")))
        card.security_requirements.append(SecurityRequirement(schemes={BEARER: StringList(list=[])}))
    return card

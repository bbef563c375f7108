"""The context graph's schema: every node type and link type, with required fields and indexes.

This is the only source of labels and relationship types that ever reach Cypher. A name
coming from a protocol, a model or a user is looked up here first; anything not listed is
refused with ``SchemaError`` before a query is sent.

Every node carries two labels: ``Node`` (so ``id`` is unique and indexed across the whole
graph) and its own label, e.g. ``Node:Product``. Every node has ``id``, ``node_type`` and
``type`` (the subtype: a product's kind, a collab's kind, a narrative's kind, ...).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cabal.errors import SchemaError

BASE_LABEL = "Node"
NODE_KEYS = ("id", "node_type", "type")
# What an update may never change: the identity and the label. The subtype may change (a
# product's type can be updated), so ``type`` is not among them.
IMMUTABLE_KEYS = ("id", "node_type")
FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Ids are looked up as top-level query parameters, which lose edge whitespace on the way to
# FalkorDB; an id with edge whitespace or control characters could be stored but never found.
_BAD_ID = re.compile(r"^\s|\s$|[\x00-\x1f\x7f\ud800-\udfff]")
# What a query cannot carry: the client sends parameters inside the query text, where FalkorDB's
# parser stops at a NUL and a lone surrogate cannot even be encoded.
_UNSENDABLE = re.compile(r"[\x00\ud800-\udfff]")
INT64 = (-(2**63), 2**63 - 1)  # FalkorDB's integers; a bigger one would be stored clipped, silently
MAX_PARAMETER_DEPTH = 64  # the client renders parameters recursively


@dataclass(frozen=True)
class NodeType:
    name: str
    description: str
    required: tuple[str, ...] = ()
    indexed: tuple[str, ...] = ()
    fulltext: tuple[str, ...] = ()  # fields in the server's full-text index of the label

    @property
    def label(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("_"))


@dataclass(frozen=True)
class LinkType:
    name: str
    description: str

    @property
    def relation(self) -> str:
        return self.name.upper()


def _nodes(*types: NodeType) -> dict[str, NodeType]:
    return {t.name: t for t in types}


def _links(**descriptions: str) -> dict[str, LinkType]:
    return {name: LinkType(name, text) for name, text in descriptions.items()}


NODE_TYPES: dict[str, NodeType] = _nodes(
    # The seed's generic types.
    NodeType("actor", "someone who acts: an agent, a user, a tool", ("name",)),
    NodeType("space", "a container: a module, a run space, a procedure template", ("name",), ("type", "name")),
    NodeType("thing", "a concrete artefact: a file, a dock, an endpoint", ("name",), ("type", "name")),
    NodeType("narrative", "a statement: objective, behavior, validation, goal, escalation, ...", ("name",), ("type", "name")),
    NodeType("moment", "something said or done at a point in time, with its reasoning", ("status",), ("type",)),
    # Cabal's mechanisms.
    NodeType("mission", "the charter a team works toward", ("name",)),
    NodeType("agent", "a team member: chair, operative, watchdog, envoy", ("name",)),
    NodeType("user", "a human the team works for", ("name",)),
    NodeType("product", "a unit of work in the product tree", ("name", "status"), ("status",)),
    NodeType("version", "an immutable snapshot of a product's content", ("product_id", "number", "content"), ("product_id",)),
    NodeType("collab", "discourse on a product: feedback, question, ...", ("comment", "importance"), ("product_id",)),
    NodeType("remark", "side communication to recipients", ("content",)),
    NodeType("directive", "the chair's instructions with an assignment", ("objective",)),
    NodeType("assignment", "work allocated to an operative", ("product_id", "assignee"), ("product_id",)),
    NodeType("reflection", "an operative's self-assessment of a product", ("dod_status",)),
    NodeType("response", "an operative's answer to a collab at Write: accept, defer or reject", ("action",)),
    NodeType("review", "a peer's assessment of a version", ("assessment",)),
    NodeType("inspection", "the watchdog's assessment of a version", ("assessment",), ("product_id",)),
    NodeType("finding", "one issue found by an inspection", ("category", "severity")),
    NodeType("acceptance", "the chair's decision on a product", ("accepted",)),
    NodeType("halt", "a pause for the user, or the end of a mission", ("message",)),
    NodeType("chair_decision", "one revision of an entry of the Chair's record of the mission's decisions",
             ("key", "topic", "revision"), ("key",)),
    NodeType("message", "a line of the team's conversation with the user", ("content", "as_agent")),
    NodeType("session", "a membrane session: a protocol run in progress", ("protocol", "state")),
    NodeType("source", "a file of the user's, one version of it, read into the mission", ("name", "sha256"),
             ("source_id",)),
    # The index reads ``words`` (the text on one line): the server's tokenizer does not split at
    # line ends, so the first word of every line of ``text`` could not be found.
    NodeType("chunk", "a section of a source's text", ("source_id", "position", "text", "words"), ("source_id",),
             fulltext=("words",)),
    # The workspace's library (its own graph, rounds/library.py): what missions made, and what
    # the user keeps. Searched through the server's full-text index of ``words``, like chunks.
    NodeType("library_item", "an accepted version of a mission's product, kept in the workspace's library",
             ("mission_id", "product_id", "version_id", "content", "words"), ("mission_id",), fulltext=("words",)),
    NodeType("fact", "a standing fact the user keeps for the next missions", ("text", "words"), fulltext=("words",)),
)

LINK_TYPES: dict[str, LinkType] = _links(
    # The seed's generic link types.
    contains="a space or parent holds a node",
    expresses="an actor said or did a moment",
    about="a moment or remark concerns a node",
    relates="a general association",
    elaborates="a node details another (a run space elaborates its procedure)",
    implements="a node realises another",
    ensures="a validation guards a behavior or objective",
    verifies="a health check verifies a node",
    docks="a dock attaches a check to a place in code",
    resolves="a resolution answers an escalation",
    blocks="an escalation or finding blocks a node",
    acts_on="a run space's active or past step",
    receives_from="a completed step hands on to its run space",
    occupies="an actor is inside a running run space",
    inhabits="an actor was inside a finished run space",
    precedes="a step comes before another",
    # Cabal's mechanisms.
    member_of="an agent belongs to a mission's team",
    owns="an agent owns a product",
    child_of="a product sits under a parent product",
    version_of="a version belongs to a product",
    supersedes="a version, or a decision's revision, replaces the previous one",
    authored="an agent or user wrote a node",
    refers_to="a collab, remark or reflection refers to a product or version",
    references="a text mentions a node with [[x:id]]",
    responds_to="a node answers a collab, halt or message",
    addressed_to="a remark, collab or halt is meant for an agent or user",
    assigned_to="an assignment goes to an agent",
    assigns="an assignment is about a product",
    directs="a directive accompanies an assignment",
    reflects_on="a reflection concerns a product",
    addresses="a reflection's feedback response, or a response at Write, addresses a collab",
    reviews="a review concerns a version",
    inspects="an inspection concerns a version",
    found="an inspection found a finding",
    accepts="an acceptance concerns a version",
    decides="an acceptance concerns a product",
    asks="a halt asks the user",
    speaks_as="a message is spoken as an agent",
    runs="a session runs inside a mission or for an actor",
    cites="a version cites a source or one of its sections with [[s:id]]",
)

ALWAYS_INDEXED: tuple[str, ...] = ("id",)


def node_type(name: object) -> NodeType:
    """The node type called ``name``; anything else (a missing or non-text value) is a ``SchemaError``."""
    if isinstance(name, str) and name in NODE_TYPES:
        return NODE_TYPES[name]
    raise SchemaError(
        f"unknown node type {name!r}; known: {', '.join(sorted(NODE_TYPES))}", item=str(name), field="node_type"
    )


def link_type(name: object) -> LinkType:
    """The link type called ``name``; anything else (a missing or non-text value) is a ``SchemaError``."""
    if isinstance(name, str) and name in LINK_TYPES:
        return LINK_TYPES[name]
    raise SchemaError(
        f"unknown link type {name!r}; known: {', '.join(sorted(LINK_TYPES))}", item=str(name), field="type"
    )


def field_name(name: str) -> str:
    """A property name safe to splice into Cypher (property keys cannot be parameters)."""
    if not isinstance(name, str) or not FIELD_NAME.match(name):
        raise SchemaError(f"invalid field name {name!r}: letters, digits and _ only", field=str(name))
    return name


def check_id(node_id: str) -> str:
    if _BAD_ID.search(node_id):
        raise SchemaError(
            f"node id {node_id!r} has edge whitespace, control characters or lone surrogates", item=node_id, field="id"
        )
    return node_id


_PRIMITIVES = (str, int, float, bool)


def unstorable(value: object) -> str | None:
    """What keeps a primitive from reaching the graph as it is, or None when nothing does: a NUL
    or a lone surrogate in a text, a float that is not finite, an integer beyond 64 bits."""
    if isinstance(value, str):
        found = _UNSENDABLE.search(value)
        if found is None:
            return None
        what = "a NUL character" if found.group() == "\x00" else f"a lone surrogate (U+{ord(found.group()):04X})"
        return f"{what} at position {found.start()}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"the number {value}"
    if isinstance(value, int) and not isinstance(value, bool) and not INT64[0] <= value <= INT64[1]:
        return "an integer beyond 64 bits"
    return None


def check_value(value: object, *, item: str, field_: str) -> None:
    """FalkorDB stores primitives and lists of primitives only, each one it can take whole (see
    ``unstorable``); refuse anything else up front."""
    if type(value) is str and _UNSENDABLE.search(value) is None:  # most values: one C-level search
        return
    values = value if isinstance(value, (list, tuple)) else (value,)
    if not all(isinstance(v, _PRIMITIVES) for v in values):
        raise SchemaError(
            f"{item}: field {field_!r} holds {type(value).__name__}; "
            "only strings, numbers, booleans and lists of them can be stored (encode structures as JSON)",
            item=item,
            field=field_,
        )
    for v in values:
        wrong = unstorable(v)
        if wrong:
            raise SchemaError(f"{item}: field {field_!r} holds {wrong}, which the graph cannot store",
                              item=item, field=field_)


def check_parameters(params: Mapping[str, object]) -> None:
    """Every value a query carries, walked without recursion; one the client could not send or
    the graph would change is refused before anything is sent (``SchemaError`` naming where).

    A net under every query: writes check their values with ``check_value`` first, which names
    the node; reads (an id, a filter, a search text from outside) meet it here."""
    stack: list[tuple[object, str, int]] = [(value, str(name), 0) for name, value in params.items()]
    while stack:
        value, path, depth = stack.pop()
        if value is None or isinstance(value, _PRIMITIVES):
            wrong = unstorable(value)
            if wrong:
                raise SchemaError(f"query parameter {path!r} holds {wrong}; nothing was sent", field=path)
            continue
        if depth >= MAX_PARAMETER_DEPTH:
            raise SchemaError(f"query parameter {path!r} is nested more than {MAX_PARAMETER_DEPTH} levels deep; "
                              "nothing was sent", field=path)
        if isinstance(value, (list, tuple)):
            stack += [(item, f"{path}.{index}", depth + 1) for index, item in enumerate(value)]
        elif isinstance(value, Mapping):
            for key, item in value.items():
                if not isinstance(key, str) or not key or "`" in key:  # the client quotes keys in backticks
                    raise SchemaError(f"query parameter {path!r} has the key {key!r}; keys are non-empty strings "
                                      "without backticks; nothing was sent", field=path)
                stack.append((item, f"{path}.{key}", depth + 1))
        else:
            raise SchemaError(f"query parameter {path!r} holds {type(value).__name__}; only texts, numbers, "
                              "booleans, lists and maps can be sent; nothing was sent", field=path)


class _Unsendable(Exception):
    """Raised inside ``cypher_header``'s walk; ``check_parameters`` then says what and where."""


def cypher_header(params: Mapping[str, object] | None) -> str:
    """The ``CYPHER name=value ...`` header that carries a query's parameters, checked as
    ``check_parameters`` checks them, in one walk.

    Values are written as FalkorDB's client writes them (``falkordb.helpers.
    stringify_param_value``: texts double-quoted with ``\\`` and ``"`` escaped, maps with their
    keys in backticks, ``null``, ``str()`` for numbers and booleans); a test holds the two equal.
    One walk instead of a check and then the client's own walk: walking a cluster's parameters
    was most of a commit's client time."""
    if not params:
        return ""
    try:
        return "CYPHER " + "".join(f"{name}={_encode(value, 0)} " for name, value in params.items())
    except _Unsendable:
        check_parameters(params)  # raises, naming the parameter and the place in it
        raise SchemaError("a query parameter cannot be sent; nothing was sent") from None  # not reached


def _encode(value: Any, depth: int) -> str:
    # Exact texts, dicts and lists first, with the text check inlined: they are nearly every value
    # of a commit, and this walk was the largest single cost of one (bench/README.md, issue 26).
    # Other types and subclasses (a StrEnum, an OrderedDict) take the general path below.
    # (``value`` is Any: the checker cannot narrow through ``kind is str``, and a second type()
    # per branch would cost what this walk saved.)
    kind = type(value)
    if kind is str:
        if _UNSENDABLE.search(value) is not None:
            raise _Unsendable
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if depth >= MAX_PARAMETER_DEPTH:
        raise _Unsendable
    if kind is dict:
        for key in value:
            if type(key) is not str or not key or "`" in key:
                raise _Unsendable
        return "{" + ",".join([f"`{key}`:{_encode(item, depth + 1)}" for key, item in value.items()]) + "}"
    if kind is list:
        return "[" + ",".join([_encode(item, depth + 1) for item in value]) + "]"
    return _encode_other(value, depth)


def _encode_other(value: object, depth: int) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return _encode(str.__str__(value), depth)  # a subclass (a StrEnum) as its plain text
    if isinstance(value, _PRIMITIVES):
        if unstorable(value):
            raise _Unsendable
        return str(value)  # numbers and booleans (str(True)), as the client writes them
    if depth >= MAX_PARAMETER_DEPTH:
        raise _Unsendable
    if isinstance(value, (list, tuple)):
        return "[" + ",".join([_encode(item, depth + 1) for item in value]) + "]"
    if isinstance(value, Mapping):
        parts = []
        for key, item in value.items():
            if not isinstance(key, str) or not key or "`" in key:
                raise _Unsendable
            parts.append(f"`{key}`:{_encode(item, depth + 1)}")
        return "{" + ",".join(parts) + "}"
    raise _Unsendable


def check_graph_name(name: object) -> str:
    """A graph's name: a text the server can key on (not empty, no control characters)."""
    if not isinstance(name, str) or not name.strip() or _BAD_ID.search(name):
        raise SchemaError(f"invalid graph name {name!r}: a graph is named by a non-empty text without edge "
                          "whitespace or control characters", field="name")
    return name


@dataclass(frozen=True)
class CheckedNode:
    id: str
    node_type: NodeType
    properties: dict[str, object] = field(hash=False)


def check_node(node: dict) -> CheckedNode:
    """Validate one node dict against the schema; returns its label and storable properties."""
    if not isinstance(node, dict):
        raise SchemaError(f"a node must be a dict, got {type(node).__name__}")
    node_id = node.get("id")
    if not isinstance(node_id, str) or not node_id:
        raise SchemaError(f"node without a string id: {node!r}", field="id")
    check_id(node_id)
    kind = node_type(node.get("node_type"))
    if not isinstance(node.get("type"), str) or not node["type"]:
        raise SchemaError(f"node {node_id!r}: missing 'type' (the {kind.name}'s subtype)", item=node_id, field="type")
    missing = [f for f in kind.required if node.get(f) in (None, "")]
    if missing:
        raise SchemaError(
            f"node {node_id!r} ({kind.name}): missing required field(s) {', '.join(missing)}",
            item=node_id,
            field=missing[0],
        )
    properties: dict[str, object] = {}
    for key, value in node.items():
        field_name(key)
        if value is None:
            continue
        check_value(value, item=node_id, field_=key)
        properties[key] = list(value) if isinstance(value, tuple) else value
    return CheckedNode(node_id, kind, properties)

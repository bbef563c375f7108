"""The workspace's memory across missions: its library of accepted work, and the user's standing facts.

The library is one graph per workspace, on the workspace's server beside its missions' graphs,
named after the workspace (``library-<id>``, the id kept in the workspace's folder: two
workspaces on one server never share it). It holds

- an item for the accepted version of every product of the workspace's missions, copied from
  the missions' graphs whenever the library is read: a mission's graph stays the truth, and the
  library is an index made from them (a product reopened and accepted again is the new version;
  a mission removed leaves the library at its next read). A mission is the workspace's when its
  folder is (``.cabal/missions/ID``): a server shared by workspaces lists all their graphs.
- the standing facts the user keeps (``cabal memory``), and only here: a fact forgotten is a
  node deleted, which takes its entry of the full-text index with it.

Both are found through the server's own full-text index (``words``, as chunks are). A mission
reads this memory only when its file says so (``sources: [{mission: ID}]``, ``memory: {library:
true, facts: true}``), and what it reads becomes its sources: listed, searched and cited like
files (``[[s:s4#2]]``), each saying where it came from. Nothing is ever put in a prompt unasked.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from cabal.errors import ConfigError, ResourceNotFound, closest
from cabal.graph import ContextGraph
from cabal.limits import unprintable
from cabal.private import private_file, workspace_folder, write_private
from cabal.rounds.workspace import Workspace, check_mission_id, mission_graph
from cabal.sources import Collected
from cabal.sources import Chunk, SourceText
from cabal.sources.chunks import chunk_text

if TYPE_CHECKING:
    from cabal.report.model import Decision, Product
    from cabal.rounds.mission import MissionSpec

LIBRARY_PREFIX = "library-"
WORKSPACE_ID_FILE = "workspace.id"
FACTS_SPACE = "facts"  # the node that counts the facts kept, so a forgotten fact's id is never given again
FACT_ID = re.compile(r"^f[1-9][0-9]*$")
FACT_MAX_CHARS = 2000
SEARCH_LIMIT = 10
FACT_KINDS = ("typed", "answer", "note", "direction")  # where a fact came from: typed, or the user's words in a mission


@dataclass(frozen=True)
class LibraryItem:
    """The accepted version of one product of one mission."""

    id: str
    mission_id: str
    mission_name: str
    started_at: str
    product_id: str
    name: str
    kind: str  # the product's type: Content, Decision, ...
    version_id: str
    version: int
    round: int  # the round it was accepted in
    content: str
    score: float | None = None  # a search's

    @property
    def origin(self) -> str:
        return (f"mission {self.mission_id} ({self.mission_name}), product {self.product_id} {self.name!r}, "
                f"version {self.version}, accepted at round {self.round}")


@dataclass(frozen=True)
class Fact:
    """A standing fact: what the user told a team, kept for the next missions."""

    id: str
    text: str
    kind: str  # one of FACT_KINDS
    mission_id: str  # the mission it was told in ("" for one typed)
    kept_at: str
    edited_at: str = ""
    score: float | None = None

    @property
    def origin(self) -> str:
        told = f"{self.kind} in mission {self.mission_id}" if self.mission_id else "typed"
        return told + (f", edited {self.edited_at}" if self.edited_at else "")


def library_graph(workspace: Workspace) -> ContextGraph:
    """The workspace's library graph (created at its first write)."""
    return workspace.graph(LIBRARY_PREFIX + _workspace_id(workspace.home))


def _workspace_id(home: Path) -> str:
    path = workspace_folder(home) / WORKSPACE_ID_FILE
    known = private_file(path).read_text(encoding="utf-8").strip()
    if re.fullmatch(r"[0-9a-f]{12}", known):
        return known
    made = secrets.token_hex(6)
    write_private(path, made + "\n")
    return made


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _words(*texts: str) -> str:
    """What the full-text index reads: the text on one line (its tokenizer does not split at line ends)."""
    return " ".join(" ".join(texts).split())


# --------------------------------------------------------------------------- the library


def workspace_missions(workspace: Workspace) -> list[str]:
    """The missions of this workspace: on its server, with their folder in it."""
    return [m for m in workspace.missions() if workspace.mission_dir(m).is_dir()]


def own_mission_graph(workspace: Workspace, mission_id: str) -> ContextGraph:
    """The graph of mission ``mission_id`` of this workspace: one of another workspace on a shared
    server is not found, as one that does not exist."""
    if not workspace.mission_dir(check_mission_id(mission_id)).is_dir():
        raise ResourceNotFound("mission", mission_id, known=workspace_missions(workspace), closest_first=True)
    return mission_graph(workspace, mission_id)


def sync(workspace: Workspace, library: ContextGraph) -> None:
    """Bring the library's items up to the missions' graphs: the accepted version of each product
    added, one no longer accepted (or of a mission gone) removed. One read of each mission."""
    with workspace.locked("library.lock"):
        held = {item["id"]: item for item in library.find("library_item", fields=["mission_id", "version_id"])}
        wanted: dict[str, dict] = {}
        for mission_id in workspace_missions(workspace):
            wanted.update(_accepted_items(workspace, mission_id, held))
        gone = [item_id for item_id in held if item_id not in wanted]
        new = [node for item_id, node in wanted.items() if item_id not in held]
        library.delete_nodes(gone)
        if new:
            library.create_cluster(new)


def _accepted_items(workspace: Workspace, mission_id: str, held: dict[str, dict]) -> dict[str, dict]:
    """The library's nodes for a mission's accepted versions, by id (those held: as they are)."""
    graph = workspace.graph(mission_id)
    try:
        products = graph.find("product", {"status": "accepted"},
                              fields=["name", "type", "accepted_version", "accepted_round"])
        accepted = {f"{mission_id}/{p['accepted_version']}": p for p in products if p.get("accepted_version")}
        missing = [item_id for item_id in accepted if item_id not in held]
        if not missing:
            return {item_id: held[item_id] for item_id in accepted}
        mission = graph.get(mission_id) or {}
        versions = {v["id"]: v for v in graph.get_many([accepted[i]["accepted_version"] for i in missing])}
    finally:
        graph.close()
    nodes = {item_id: held[item_id] for item_id in accepted if item_id in held}
    for item_id in missing:
        product = accepted[item_id]
        version = versions.get(str(product["accepted_version"]))
        if version is None:
            continue
        content = str(version.get("content") or "")
        nodes[item_id] = {
            "id": item_id, "node_type": "library_item", "type": str(product.get("type") or "Content"),
            "mission_id": mission_id, "mission_name": str(mission.get("name") or mission_id),
            "started_at": str(mission.get("started_at") or ""), "product_id": product["id"],
            "name": str(product.get("name") or product["id"]), "version_id": version["id"],
            "version": int(version.get("number") or 1), "round": int(product.get("accepted_round") or 0),
            "content": content, "words": _words(str(product.get("name") or ""), content)}
    return nodes


def _item(node: dict) -> LibraryItem:
    return LibraryItem(
        id=node["id"], mission_id=node["mission_id"], mission_name=str(node.get("mission_name") or ""),
        started_at=str(node.get("started_at") or ""), product_id=node["product_id"], name=str(node.get("name") or ""),
        kind=str(node.get("type") or ""), version_id=node["version_id"], version=int(node.get("version") or 1),
        round=int(node.get("round") or 0), content=str(node.get("content") or ""), score=node.get("score"))


def _newest_first(items: list[LibraryItem]) -> list[LibraryItem]:
    return sorted(items, key=lambda i: (i.started_at, i.mission_id, i.round, i.name), reverse=True)


def library_items(workspace: Workspace) -> list[LibraryItem]:
    """Every accepted product of the workspace, newest mission first (then latest accepted)."""
    with library_graph(workspace) as library:
        sync(workspace, library)
        return _newest_first([_item(node) for node in library.find("library_item")])


@dataclass(frozen=True)
class Found:
    """What a search of the library found: accepted products and standing facts, best first."""

    items: tuple[LibraryItem, ...]
    facts: tuple[Fact, ...]


def search_library(workspace: Workspace, words: str, limit: int = SEARCH_LIMIT) -> Found:
    """The library's accepted products and standing facts that best match ``words`` (any of
    them, by stem: the server's full-text index), best first."""
    with library_graph(workspace) as library:
        sync(workspace, library)
        items = [_item(node) for node in library.search_full_text("library_item", words, limit)]
        facts = [_fact(node) for node in library.search_full_text("fact", words, limit)]
    return Found(tuple(items), tuple(facts))


# -------------------------------------------------------------------------- standing facts


def _fact(node: dict) -> Fact:
    return Fact(id=node["id"], text=str(node.get("text") or ""), kind=str(node.get("type") or "typed"),
                mission_id=str(node.get("mission_id") or ""), kept_at=str(node.get("kept_at") or ""),
                edited_at=str(node.get("edited_at") or ""), score=node.get("score"))


def facts(workspace: Workspace) -> list[Fact]:
    """The standing facts, in the order they were kept."""
    with library_graph(workspace) as library:
        return sorted((_fact(node) for node in library.find("fact")), key=lambda f: int(f.id[1:]))


def _checked_text(text: str) -> str:
    text = text.strip()
    if not text:
        raise ConfigError("a fact cannot be empty: write what the team should know")
    if len(text) > FACT_MAX_CHARS:
        raise ConfigError(f"a fact is at most {FACT_MAX_CHARS} characters; this one is {len(text)}")
    wrong = unprintable(text)
    if wrong:
        raise ConfigError(f"a fact must be plain text: this one holds {wrong}")
    return text


def keep_facts(workspace: Workspace, told: list[tuple[str, str, str]]) -> list[Fact]:
    """Keep ``(text, kind, mission_id)`` as standing facts, numbered after every fact ever kept."""
    checked = [(_checked_text(text), kind, mission_id) for text, kind, mission_id in told]
    with library_graph(workspace) as library, workspace.locked("library.lock"):
        counter = library.get(FACTS_SPACE)
        last = int((counter or {}).get("last_number") or 0)
        now = _now()
        nodes: list[dict[str, object]] = [{"id": f"f{last + n}", "node_type": "fact", "type": kind, "text": text, "words": _words(text),
                  "mission_id": mission_id, "kept_at": now} for n, (text, kind, mission_id) in enumerate(checked, 1)]
        counted = {"id": FACTS_SPACE, "fields": {"last_number": last + len(nodes)}}
        if counter is None:
            nodes.append({"id": FACTS_SPACE, "node_type": "space", "type": "facts", "name": "standing facts",
                          "last_number": last + len(nodes)})
            library.create_cluster(nodes)
        else:
            library.create_cluster(nodes, updates=[counted])
    return [_fact(node) for node in nodes if node["node_type"] == "fact"]


def told_in(workspace: Workspace, mission_id: str) -> list[tuple[str, str, str]]:
    """What the user told mission ``mission_id``: answers (sign-offs and changes asked for
    included), ``cabal say`` notes and directions, as ``(text, kind, mission_id)`` in order."""
    from cabal.report import read_report

    with own_mission_graph(workspace, mission_id) as graph:
        report = read_report(graph, mission_id)
    return [(line.text, line.kind, mission_id) for line in report.conversation
            if line.speaker == "you" and line.kind in FACT_KINDS]


def _known_fact(library: ContextGraph, fact_id: str) -> dict:
    node = library.get(fact_id) if FACT_ID.match(fact_id) else None
    if node is None or node.get("node_type") != "fact":
        known = sorted((n["id"] for n in library.find("fact", fields=["id"])), key=lambda i: int(i[1:]))
        near = f"; closest: {', '.join(closest(fact_id, known)[:3])}" if known else "; there are no facts"
        raise ConfigError(f"no fact {fact_id!r}{near}", hint="`cabal memory` lists them")
    return node


def edit_fact(workspace: Workspace, fact_id: str, text: str) -> Fact:
    """The fact ``fact_id`` with ``text`` instead of what it said (its index entry with it)."""
    text = _checked_text(text)
    with library_graph(workspace) as library, workspace.locked("library.lock"):
        _known_fact(library, fact_id)
        return _fact(library.update(fact_id, {"text": text, "words": _words(text), "edited_at": _now()}))


def forget_fact(workspace: Workspace, fact_id: str) -> Fact:
    """Remove the fact ``fact_id``: its node, and so its entry of the full-text index."""
    with library_graph(workspace) as library, workspace.locked("library.lock"):
        fact = _fact(_known_fact(library, fact_id))
        library.delete_nodes([fact_id])
    return fact


# ------------------------------------------------------- memory as a mission's sources


def _content_source(name: str, content: str, origin: str, note: str | None) -> SourceText:
    data = content.encode("utf-8")
    return SourceText(path="", name=name, note=note, size=len(data), sha256=hashlib.sha256(data).hexdigest(),
                      format="markdown", chunks=chunk_text(content, "markdown"), origin=origin)


def _item_source(item: LibraryItem, note: str | None) -> SourceText:
    return _content_source(f"{item.mission_id}: {item.name} (version {item.version})", item.content, item.origin, note)


def mission_sources(workspace: Workspace, mission_id: str, note: str | None, where: str) -> list[SourceText]:
    """An earlier mission as sources: each accepted product's accepted version, then one source
    of the Chair's decisions and the user's answers and notes. ``where`` locates the entry that
    named it, for the error of a mission not found."""
    from cabal.report import read_report

    try:
        graph = own_mission_graph(workspace, mission_id)
    except (ResourceNotFound, ConfigError) as error:
        raise ConfigError(f"{where}: {error}") from None
    with graph:
        report = read_report(graph, mission_id)
    name = report.mission.name
    texts = []
    for product in report.products:
        version = next((v for v in product.versions if v.id == product.accepted_version_id), None)
        if version is None or product.status != "accepted":  # a product removed since keeps its field
            continue
        item = LibraryItem(id=f"{mission_id}/{version.id}", mission_id=mission_id, mission_name=name,
                           started_at=report.mission.started_at or "", product_id=product.id, name=product.name,
                           kind=product.type, version_id=version.id, version=version.number,
                           round=next((d.round for d in product.decisions if d.accepted and d.version_id == version.id),
                                      version.round), content=version.content)
        texts.append(_item_source(item, note))
    decisions = [_decision_line(product, decision) for product in report.products for decision in product.decisions]
    told = [f"- round {line.round}, {line.kind}: {line.text}" for line in report.conversation
            if line.speaker == "you" and line.kind in FACT_KINDS]
    sections = [f"# The request\n\n{report.mission.request}"]
    if report.mission.charter:
        sections.append(f"# The charter\n\n{report.mission.charter}")
    if decisions:
        sections.append("# The Chair's decisions\n\n" + "\n".join(decisions))
    if told:
        sections.append("# What the user told the team\n\n" + "\n".join(told))
    texts.append(_content_source(f"{mission_id}: decisions and the user's answers", "\n\n".join(sections),
                                 f"mission {mission_id} ({name}): its request, charter, the Chair's decisions and "
                                 "what the user told the team", note))
    return texts


def _decision_line(product: Product, decision: Decision) -> str:
    if not decision.accepted:
        return f"- {product.name}: rejected at round {decision.round}" + (f": {decision.reason}" if decision.reason else "")
    number = next((v.number for v in product.versions if v.id == decision.version_id), "?")
    return f"- {product.name}: accepted version {number} at round {decision.round}"


def library_sources(workspace: Workspace, *, skip_missions: set[str]) -> list[SourceText]:
    """The library as it stands (``memory: {library: true}``): each accepted product a source,
    newest first, but those of missions the mission names itself."""
    return [_item_source(item, None) for item in library_items(workspace) if item.mission_id not in skip_missions]


def facts_source(workspace: Workspace) -> SourceText | None:
    """The standing facts as one source (``memory: {facts: true}``), a section each; None when
    there are none."""
    kept = facts(workspace)
    if not kept:
        return None
    chunks = tuple(Chunk(position, f"fact {fact.id}", fact.text) for position, fact in enumerate(kept, start=1))
    data = "\n".join(fact.text for fact in kept).encode("utf-8")
    return SourceText(path="", name="standing facts", note=None, size=len(data),
                      sha256=hashlib.sha256(data).hexdigest(), format="text", chunks=chunks,
                      origin="the standing facts the user keeps (cabal memory), as they stood when the mission started")


def with_memory(workspace: Workspace, spec: MissionSpec, collected: Collected | None) -> Collected | None:
    """What a new mission reads: its files, then the earlier missions its file names, then the
    library and the standing facts when its ``memory:`` asks for them (none of it otherwise)."""
    texts: list[SourceText] = []
    named = set()
    for mission_id, note, where in spec.earlier_missions:
        texts += mission_sources(workspace, mission_id, note, where)
        named.add(mission_id)
    if spec.memory.library:
        texts += library_sources(workspace, skip_missions=named)
    if spec.memory.facts and (kept := facts_source(workspace)) is not None:
        texts.append(kept)
    if not texts:
        return collected
    return Collected((collected.files if collected else ()) + tuple(texts))

"""``ContextGraph``: the one door to the database. All Cypher runs through here."""

from __future__ import annotations

import os

import redis
from falkordb import FalkorDB
from falkordb.edge import Edge
from falkordb.node import Node
from falkordb.query_result import QueryResult

from cabal.config import ServerAddress, redact, resolve_server
from cabal.errors import ClusterError, GraphError, GraphUnavailable, NodeNotFound, SchemaError
from cabal.graph import reads, schema
from cabal.graph.behind import WriteBehind
from cabal.graph.server import EmbeddedServer
from cabal.graph.writes import ClusterQuery, build_cluster_query, build_copy_queries, delete_nodes

_INDEXED_GRAPHS: set[tuple[str, str]] = set()  # (address, graph) pairs whose indexes exist


def connect(address: ServerAddress) -> tuple[FalkorDB, EmbeddedServer | None]:
    """Connect to the configured server, starting the embedded one if needed."""
    server = None
    if address.embedded:
        server = EmbeddedServer(address.home)
        server.start()
        db = FalkorDB(unix_socket_path=str(server.socket_path))
        shown = f"{server.address} (embedded, workspace {address.home})"
    else:
        url = address.url or ""
        shown = redact(url)
        try:
            if url.startswith("unix://"):
                db = FalkorDB(unix_socket_path=url[len("unix://"):], socket_connect_timeout=3)
            else:
                db = FalkorDB.from_url(url, socket_connect_timeout=3)
        except (redis.ConnectionError, redis.TimeoutError, OSError, ValueError) as exc:
            raise _unreachable(shown, exc) from None
    try:
        db.connection.ping()
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        raise _unreachable(shown, exc) from None
    except redis.AuthenticationError as exc:
        raise GraphUnavailable(shown, f"authentication failed ({exc})", hint="check the password in FALKORDB_URL") from None
    return db, server


def _unreachable(shown: str, exc: Exception) -> GraphUnavailable:
    return GraphUnavailable(
        shown,
        str(exc) or type(exc).__name__,
        hint="start FalkorDB there, fix FALKORDB_URL, or unset FALKORDB_URL (and NGRAM_FALKORDB_HOST) "
        "to use the embedded server",
    )


def _node_rows(result: QueryResult) -> list[dict]:
    return [dict(row[0].properties) if isinstance(row[0], Node) else dict(row[0]) for row in result.result_set]


def _plain(value: object) -> object:
    if isinstance(value, Node):
        return dict(value.properties)
    if isinstance(value, Edge):
        return {"type": value.relation.lower(), "properties": dict(value.properties)}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


class _EmptyResult:
    """What a read of a graph that does not exist yet returns."""

    result_set: list = []
    header: list = []


_EMPTY = _EmptyResult()


class ContextGraph:
    """A named FalkorDB graph (one per mission) with the schema-checked API of Cabal.

    Open with ``ContextGraph.open(url=None, name="cabal", home=None)``; with no URL it starts
    (or attaches to) the embedded server of the workspace. Results are plain dicts.
    """

    def __init__(self, db: FalkorDB, name: str, address: ServerAddress, server: EmbeddedServer | None) -> None:
        self._db = db
        self._graph = db.select_graph(schema.check_graph_name(name))
        self.name = name
        self.address = address
        self.server = server
        self._behind: WriteBehind | None = None  # writes sent ahead of this graph's queries

    @classmethod
    def open(
        cls, url: str | None = None, *, name: str = "cabal", home: str | os.PathLike[str] | None = None
    ) -> ContextGraph:
        return cls.at(resolve_server(url, home), name=name)

    @classmethod
    def at(cls, address: ServerAddress, *, name: str = "cabal") -> ContextGraph:
        """The graph ``name`` on the server at ``address`` (``resolve_server``'s), started if it
        is the workspace's embedded one and not running."""
        schema.check_graph_name(name)  # before a server is started or a connection made for nothing
        db, server = connect(address)
        return cls(db, name, address, server)

    def select(self, name: str) -> ContextGraph:
        """Another named graph on the same connection."""
        return ContextGraph(self._db, name, self.address, self.server)

    def close(self) -> None:
        self._db.connection.close()

    def behind(self, writer: WriteBehind | None) -> None:
        """Writes ``writer`` sends come before every later query of this graph: each query (from
        any thread but the writer's) first waits until they are acknowledged (``cabal.graph.behind``).
        None detaches it."""
        self._behind = writer

    def _settle(self) -> None:
        if self._behind is not None:
            self._behind.settle()

    def recover(self) -> bool:
        """After ``GraphUnavailable``: start the workspace's embedded server again if it stopped,
        and drop the connections to the dead one (the next query opens a new one). Returns
        whether it started the server; raises ``GraphUnavailable`` if it cannot, or if the
        server is not Cabal's own to start (a ``FALKORDB_URL``)."""
        if self.server is None:
            raise GraphUnavailable(self.address.describe(), "it is not Cabal's embedded server, so Cabal does not "
                                                            "start it again")
        started = self.server.start()
        self._db.connection.connection_pool.disconnect()
        return started

    def __enter__(self) -> ContextGraph:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------------- plumbing

    def _run(self, text: str, params: dict[str, object] | None = None, *, read_only: bool = False) -> QueryResult:
        """One query. A graph comes into being (with its indexes) at its first write; reading a
        graph that does not exist yet reads as empty instead of creating it."""
        header = schema.cypher_header(params)  # checked: a value that cannot be sent is refused here
        self._settle()
        try:
            if not read_only:
                self._ensure_indexes()
            command = "GRAPH.RO_QUERY" if read_only else "GRAPH.QUERY"
            return QueryResult(self._graph, self._db.connection.execute_command(
                command, self.name, header + text, "--compact"))
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise GraphUnavailable(self.address.describe(), str(exc)) from None
        except redis.ResponseError as exc:
            if read_only and "empty key" in str(exc):
                return _EMPTY
            raise GraphError(f"graph {self.name!r} refused a query: {exc}") from None

    def _nodes(self, text: str, params: dict[str, object]) -> list[dict]:
        return _node_rows(self._run(text, params, read_only=True))

    def _pipelined(self, command: str, queries: list[reads.Query]) -> list[object]:
        """Several queries sent at once and answered in order: one round trip instead of one
        each. A refused query's reply is its ``ResponseError``, for the caller to judge."""
        headers = [schema.cypher_header(params) for _, params in queries]  # refused before anything is sent
        self._settle()
        pipe = self._db.connection.pipeline(transaction=False)
        for header, (text, _) in zip(headers, queries):
            pipe.execute_command(command, self.name, header + text, "--compact")
        try:
            return pipe.execute(raise_on_error=False)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise GraphUnavailable(self.address.describe(), str(exc)) from None

    def _ensure_indexes(self) -> None:
        key = (self.address.describe(), self.name)
        if key in _INDEXED_GRAPHS:
            return
        wanted = [(schema.BASE_LABEL, f) for f in schema.ALWAYS_INDEXED]
        wanted += [(t.label, f) for t in schema.NODE_TYPES.values() for f in t.indexed]
        # All in one round trip (straight to the client: _run would come back here).
        replies = self._pipelined("GRAPH.QUERY", [(f"CREATE INDEX FOR (n:{label}) ON (n.{schema.field_name(field)})", {})
                                                  for label, field in wanted])
        full_text = [(t.name, f) for t in schema.NODE_TYPES.values() for f in t.fulltext]
        replies += self._pipelined("GRAPH.QUERY", [reads.create_full_text_index(label, field)
                                                   for label, field in full_text])
        for (label, field), reply in zip(wanted + full_text, replies):
            if isinstance(reply, redis.ResponseError) and "already indexed" not in str(reply):
                raise GraphError(f"cannot create index {label}.{field}: {reply}")
        _INDEXED_GRAPHS.add(key)

    # ---------------------------------------------------------------------------- writes

    def create_cluster(
        self,
        nodes: list[dict],
        links: list[dict] | None = None,
        *,
        updates: list[dict] | None = None,
        unlinks: list[dict] | None = None,
    ) -> dict[str, int]:
        """Commit nodes and links (and field updates of existing nodes) in one round trip.

        ``updates``: ``[{"id", "fields"}]`` set on existing nodes (None removes a field).
        ``unlinks``: ``[{"type", "from", "to"}]`` links removed before the new links are made.

        All or nothing: if a link or update names a node that neither exists nor is part of
        the cluster, nothing is written and ``ClusterError`` lists the missing ids.
        Idempotent on ids: committing the same cluster again creates nothing.
        Returns ``{"nodes": created, "links": created}``.
        """
        query = build_cluster_query(nodes, links or [], updates, unlinks)
        result = self._run(query.fresh_text, query.params)
        if not result.result_set:  # a node exists already (a replayed commit), or the guard refuses
            result = self._run(query.text, query.params)
            if not result.result_set:
                raise self._refusal(query)
        counts = {"nodes": int(result.nodes_created), "links": int(result.relationships_created)}
        if unlinks:
            counts["unlinked"] = int(result.relationships_deleted)
        return counts

    def _refusal(self, query: ClusterQuery) -> ClusterError:
        """Explain why the guard row refused a cluster (only runs on the failure path)."""
        existing = {node["id"]: node for node in self.get_many(list(query.external_ids) + list(query.created_types))}
        missing = [node_id for node_id in query.external_ids if node_id not in existing]
        if missing:
            return ClusterError(
                f"cluster refers to node(s) that do not exist: {', '.join(missing)}; nothing was written",
                missing_ids=missing,
            )
        clashes = [
            f"{node_id!r} is a {existing[node_id]['node_type']}, not a {kind}"
            for node_id, kind in query.created_types.items()
            if node_id in existing and existing[node_id].get("node_type") != kind
        ]
        return ClusterError(f"cluster reuses existing id(s) with another node type: {'; '.join(clashes)}; nothing was written")

    def update(self, node_id: str, fields: dict[str, object]) -> dict:
        """Set (or, with None, remove) fields of an existing node; returns the node."""
        try:
            self.create_cluster([], [], updates=[{"id": node_id, "fields": fields}])
        except ClusterError:
            raise NodeNotFound(node_id) from None
        return self.get(node_id) or {}

    def delete_nodes(self, ids: list[str]) -> int:
        """Remove the nodes of ``ids`` with their links (the library's only deletion: a mission's
        graph deletes no node); returns how many went. Their full-text entries go with them."""
        if not ids:
            return 0
        return int(self._run(*delete_nodes(ids)).nodes_deleted)

    def copy(self, name: str) -> ContextGraph:
        """This graph copied under another name (empty if this one holds nothing yet).

        The membrane runs a Cypher read on such a scratch copy with a session's pending cluster
        committed into it, so the read sees what the session prepared (read-your-writes).
        """
        try:
            self._settle()
            self._db.connection.execute_command("GRAPH.COPY", self.name, name)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise GraphUnavailable(self.address.describe(), str(exc)) from None
        except redis.ResponseError as exc:
            if "empty key" not in str(exc):
                raise GraphError(f"cannot copy graph {self.name!r} to {name!r}: {exc}") from None
        return self.select(name)

    def write_in_order(self, nodes: list[dict], links: list[dict]) -> None:
        """Write ``nodes``, then ``links`` between them, into this graph (empty: a new mission's
        graph) in their order, so its order of creation is theirs (``history``). Pipelined: one
        round trip. Nothing is checked against existing nodes: the caller writes a fresh graph."""
        self._ensure_indexes()
        queries = build_copy_queries(nodes, links)
        for reply in self._pipelined("GRAPH.QUERY", queries):
            if isinstance(reply, redis.ResponseError):
                raise GraphError(f"graph {self.name!r} refused a copied write: {reply}")

    def history(self) -> tuple[list[tuple[int, dict]], list[tuple[int, dict]]]:
        """Every node and every link with the server's internal id, in the order they were
        created: ``(seq, node)`` and ``(seq, {"type", "from", "to", "properties"})``."""
        nodes = [(int(seq), dict(node.properties)) for seq, node in self._run(*reads.nodes_in_order(),
                                                                               read_only=True).result_set]
        links = [(int(seq), {"type": kind.lower(), "from": a, "to": b, "properties": dict(props)})
                 for seq, kind, a, b, props in self._run(*reads.links_in_order(), read_only=True).result_set]
        return nodes, links

    def delete_graph(self) -> None:
        """Drop this whole named graph (a mission's graph, a test's graph)."""
        try:
            self._graph.delete()
        except redis.ResponseError as exc:
            if "empty key" not in str(exc) and "Invalid graph operation" not in str(exc):
                raise GraphError(f"cannot delete graph {self.name!r}: {exc}") from None
        _INDEXED_GRAPHS.discard((self.address.describe(), self.name))

    # ----------------------------------------------------------------------------- reads

    def read_many(self, queries: dict[str, reads.Query]) -> dict[str, list[dict]]:
        """Several node reads (``reads`` queries) in one round trip: each key's nodes, as
        ``find`` and ``get_many`` return them."""
        found: dict[str, list[dict]] = {}
        for key, reply in zip(queries, self._pipelined("GRAPH.RO_QUERY", list(queries.values()))):
            if isinstance(reply, redis.ResponseError):
                if "empty key" not in str(reply):  # a graph that does not exist yet reads as empty
                    raise GraphError(f"graph {self.name!r} refused a query: {reply}")
                found[key] = []
            else:
                found[key] = _node_rows(QueryResult(self._graph, reply))
        return found

    def get(self, node_id: str) -> dict | None:
        nodes = self._nodes(*reads.node_by_id(node_id))
        return nodes[0] if nodes else None

    def get_many(self, ids: list[str]) -> list[dict]:
        return self._nodes(*reads.nodes_by_ids(list(ids))) if ids else []

    def exists(self, node_id: str) -> bool:
        return self.get(node_id) is not None

    def find(
        self,
        node_type: str,
        where: dict[str, object] | None = None,
        in_space: str | None = None,
        limit: int | None = None,
        fields: list[str] | None = None,
    ) -> list[dict]:
        """Nodes of a type, filtered by equal fields (a list value means "one of").

        ``fields`` returns only those fields (plus ``id``); a missing field comes back None.
        """
        return self._nodes(*reads.find(node_type, where, in_space, limit, fields))

    def links_from(self, node_id: str, type: str | None = None) -> list[dict]:
        return self._links(*reads.links(node_id, type, outgoing=True))

    def links_to(self, node_id: str, type: str | None = None) -> list[dict]:
        return self._links(*reads.links(node_id, type, outgoing=False))

    def _links(self, text: str, params: dict[str, object]) -> list[dict]:
        rows = self._run(text, params, read_only=True).result_set
        return [{"type": t.lower(), "from": a, "to": b, "properties": dict(p)} for t, a, b, p in rows]

    def related_to(
        self, node_id: str, via: str | list[str] | None = None, direction: str = "both", depth: int = 1
    ) -> list[dict]:
        return self._nodes(*reads.related_to(node_id, via, direction, depth))

    def contents_of(self, space_id: str, node_type: str | None = None, depth: int = 1) -> list[dict]:
        return self._nodes(*reads.contents_of(space_id, node_type, depth))

    def search(self, text: str, limit: int = 50) -> list[dict]:
        """Or-search over names and text fields; best matches (most words found) first."""
        if not text.split():
            return []
        return self._nodes(*reads.search(text, limit))

    def search_chunks(self, query: str, limit: int = 5) -> list[dict]:
        """The chunks of current source versions that best match ``query``'s words (the server's
        full-text index), best first: each chunk's fields and its ``score``."""
        text, params = reads.search_chunks(query, limit)
        if not params["query"]:
            return []
        return [{**row["chunk"], "score": row["score"]} for row in self.read_cypher(text, params)]

    def search_full_text(self, node_type: str, query: str, limit: int = 10) -> list[dict]:
        """The nodes of ``node_type`` whose indexed field best matches ``query``'s words (the
        server's full-text index), best first: each node's fields and its ``score``."""
        text, params = reads.search_full_text(node_type, query, limit)
        if not params["query"]:
            return []
        return [{**row["node"], "score": row["score"]} for row in self.read_cypher(text, params)]

    def preset(self, name: str) -> list[dict]:
        return self._nodes(*reads.preset(name))

    def all_spaces(self) -> list[dict]:
        return self.preset("all_spaces")

    def all_validations(self) -> list[dict]:
        return self.preset("all_validations")

    def all_behaviors(self) -> list[dict]:
        return self.preset("all_behaviors")

    def all_goals(self) -> list[dict]:
        return self.preset("all_goals")

    def all_escalations(self) -> list[dict]:
        return self.preset("all_escalations")

    def read_cypher(self, text: str, params: dict[str, object] | None = None) -> list[dict]:
        """Run a read-only Cypher query; rows as dicts by column. A query that could write is
        refused before it is sent (``reads.writing_clause``), and the server's read-only mode
        would refuse it anyway."""
        if not isinstance(text, str) or not text.strip():
            raise SchemaError("a Cypher query must be a non-empty string", field="query")
        writing = reads.writing_clause(text)
        if writing:
            raise SchemaError(f"a read-only query may not write ({writing}); nothing was sent", field="query")
        result = self._run(text, params or {}, read_only=True)
        columns = [column[1] if isinstance(column, (list, tuple)) else column for column in result.header]
        columns = [c.decode() if isinstance(c, bytes) else str(c) for c in columns]
        return [dict(zip(columns, (_plain(v) for v in row))) for row in result.result_set]

    def counts(self) -> dict[str, int]:
        rows = self._run(*reads.counts(), read_only=True).result_set
        nodes, links = rows[0] if rows else (0, 0)
        return {"nodes": int(nodes), "links": int(links)}

    # ---------------------------------------------------------------------- server level

    def list_graphs(self) -> list[str]:
        return sorted(self._db.list_graphs())


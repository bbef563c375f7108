import pytest

from cabal.refs import (
    KINDS,
    Ref,
    find_malformed,
    parse_refs,
    render_ref,
    replace_refs,
    unknown_refs,
)


def test_kinds_map_prefix_to_name():
    assert KINDS == {
        "p": "product",
        "v": "version",
        "c": "collab",
        "a": "agent",
        "u": "user",
        "s": "source",
    }


def test_ref_renders_and_names_its_kind():
    ref = Ref("p", "42")
    assert ref.render() == "[[p:42]]"
    assert ref.kind_name == "product"
    assert render_ref("v", "p1:3") == "[[v:p1:3]]"


@pytest.mark.parametrize(
    ("kind", "id"), [("x", "1"), ("P", "1"), ("p", ""), ("p", "a b"), ("p", "a]")]
)
def test_ref_rejects_unknown_kind_and_bad_id(kind, id):
    with pytest.raises(ValueError):
        Ref(kind, id)


def test_parse_refs_in_order_of_appearance_with_repeats():
    text = (
        "See [[p:1]] and [[v:v-7]], asked by [[a:operative-2]] in [[c:c3]]; "
        "[[p:1]] again, [[u:all]]."
    )
    assert parse_refs(text) == [
        Ref("p", "1"),
        Ref("v", "v-7"),
        Ref("a", "operative-2"),
        Ref("c", "c3"),
        Ref("p", "1"),
        Ref("u", "all"),
    ]


def test_parse_refs_accepts_every_id_character():
    assert parse_refs("[[p:Ab_9-x.y:z]]") == [Ref("p", "Ab_9-x.y:z")]


def test_parse_render_round_trip():
    text = "[[p:1]] [[v:2]] [[c:3]] [[a:chair-1]] [[u:u.1]]"
    refs = parse_refs(text)
    assert " ".join(ref.render() for ref in refs) == text
    assert parse_refs(" ".join(render_ref(ref.kind, ref.id) for ref in refs)) == refs


def test_unknown_prefixes_and_broken_shapes_are_not_refs():
    text = "[[x:1]] [[P:2]] [[p:]] [[p: 3]] [[p:a b]] [p:4] [[p4]] [[[p:5]]]"
    assert parse_refs(text) == [Ref("p", "5")]


def test_find_malformed_reports_near_misses_in_order():
    text = (
        "ok [[p:1]], bad [[x:1]] and [[P:2]] and [[p:]] and [[p: 3]] and [[p:a b]]; "
        "[[1, 2]] is code"
    )
    assert find_malformed(text) == ["[[x:1]]", "[[P:2]]", "[[p:]]", "[[p: 3]]", "[[p:a b]]"]


def test_find_malformed_is_empty_for_clean_text():
    assert find_malformed("[[p:1]] and [[u:all]] plus list [[1, 2], [3]]") == []


def test_replace_refs_maps_short_ids_to_real_ids_and_back():
    real = {("p", "p1"): "prod-8f2a", ("c", "c1"): "collab-77"}
    short = {(kind, value): key for (kind, key), value in real.items()}
    text = (
        "Revise [[p:p1]] per [[c:c1]] from [[a:operative-1]]; "
        "[[p:p1]] is the root. [[x:p1]] stays."
    )

    def to_real(ref: Ref) -> str:
        return real.get((ref.kind, ref.id), ref.id)

    def to_short(ref: Ref) -> str:
        return short.get((ref.kind, ref.id), ref.id)

    mapped = replace_refs(text, to_real)
    assert mapped == (
        "Revise [[p:prod-8f2a]] per [[c:collab-77]] from [[a:operative-1]]; "
        "[[p:prod-8f2a]] is the root. [[x:p1]] stays."
    )
    assert replace_refs(mapped, to_short) == text


def test_replace_refs_lets_key_error_through():
    with pytest.raises(KeyError):
        replace_refs("[[p:p9]]", lambda ref: {"p1": "real"}[ref.id])


def test_replace_refs_rejects_an_invalid_new_id():
    with pytest.raises(ValueError):
        replace_refs("[[p:p1]]", lambda ref: "has space")


def test_unknown_refs_lists_each_unknown_once_in_order():
    known_ids = {("p", "p1"), ("a", "chair-1")}
    calls: list[Ref] = []

    def known(ref: Ref) -> bool:
        calls.append(ref)
        return (ref.kind, ref.id) in known_ids

    text = "[[p:p1]] [[p:p9]] [[a:chair-1]] [[c:c4]] [[p:p9]] [[v:p1]]"
    assert unknown_refs(text, known) == [Ref("p", "p9"), Ref("c", "c4"), Ref("v", "p1")]
    assert len(calls) == 5


def test_unknown_refs_empty_when_all_known():
    assert unknown_refs("[[p:1]] [[p:2]]", lambda ref: True) == []

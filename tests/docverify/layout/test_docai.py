"""Document AI JSON → DocumentBundle (docverify.layout.docai).

Real outputs: ../shared/corpora/docai/ (``layout_parser.json``: Layout Parser over a 15-page
scan; ``toolbox_invoice_test-0.json``: Invoice Parser, one shard, with its source PDF). Every
proto3-JSON trap is also covered by small synthetic Documents built here; the snake_case form is
produced by the real ``google-cloud-documentai`` client (``Document.to_json`` /
``Document.to_dict``), not typed by hand.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import pathlib
import re
import subprocess
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from docverify.domain.models import DocumentBundle
from docverify.layout import docai
from docverify.layout.docai import (
    MAX_PAGES,
    PARSER_ID_LAYOUT,
    PARSER_ID_OCR,
    bundle_from_docai,
    default_doc_id,
    docai_output_sha256,
    load_docai_output,
)
from docverify.layout.errors import PARSE_ERROR_CODES, ParseError

REPO = pathlib.Path(__file__).resolve().parents[3]


def convert(doc, **kw) -> DocumentBundle:
    kw = {"doc_id": "d", "file_path": "gs://bucket/out/d.json", "sha256": "0" * 64, **kw}
    return bundle_from_docai(doc, **kw)


def core(b: DocumentBundle) -> dict:
    """The bundle without its (wall-clock) processing timestamp."""
    return b.model_dump(exclude={"processing_timestamp"})


def fails(code: str, doc, **kw) -> ParseError:
    with pytest.raises(ParseError) as ei:
        convert(doc, **kw)
    assert ei.value.code == code, ei.value
    assert ei.value.code in PARSE_ERROR_CODES
    return ei.value


def check_invariants(b: DocumentBundle) -> None:
    assert [p.page_num for p in b.pages] == list(range(1, b.total_pages + 1))
    for p in b.pages:
        assert len(p.layout_metadata.block_types) == len(p.paragraphs)
        assert all(par.strip() == par and par for par in p.paragraphs)


# --------------------------------------------------------------------------- builders


def seg(a: int, b: int) -> dict:
    """A proto3-JSON text segment: int64 as strings, a zero startIndex omitted."""
    return {"endIndex": str(b)} | ({"startIndex": str(a)} if a else {})


def ocr_doc(pages: list[list[str]]) -> dict:
    """An OCR-style Document: text + pages, each paragraph and page anchored into the text."""
    text, out = "", []
    for n, paras in enumerate(pages, 1):
        p0, anchors = len(text), []
        for para in paras:
            a = len(text)
            text += para + "\n"
            anchors.append({"layout": {"textAnchor": {"textSegments": [seg(a, len(text))]}}})
        out.append({"pageNumber": n, "layout": {"textAnchor": {"textSegments": [seg(p0, len(text))]}},
                    "paragraphs": anchors})
    return {"text": text, "pages": out}


def _rebase(obj, delta: int):
    if isinstance(obj, dict):
        if "textSegments" in obj:
            obj["textSegments"] = [seg(int(s.get("startIndex", 0)) - delta, int(s["endIndex"]) - delta)
                                   for s in obj["textSegments"]]
        for v in obj.values():
            _rebase(v, delta)
    elif isinstance(obj, list):
        for v in obj:
            _rebase(v, delta)


def shard_ocr(doc: dict, groups: list[int]) -> list[dict]:
    """Split an OCR Document the way batch processing does: ``groups`` page counts per shard;
    each shard holds its pages' slice of the text, anchors relative to that slice, and shardInfo."""
    assert sum(groups) == len(doc["pages"])
    shards, first = [], 0
    for k, n in enumerate(groups):
        pages = copy.deepcopy(doc["pages"][first:first + n])
        start = int(pages[0]["layout"]["textAnchor"]["textSegments"][0].get("startIndex", 0))
        end = int(pages[-1]["layout"]["textAnchor"]["textSegments"][-1]["endIndex"])
        _rebase(pages, start)
        info = {"shardCount": str(len(groups))} | ({"shardIndex": str(k)} if k else {}) | (
            {"textOffset": str(start)} if start else {})
        shards.append({"text": doc["text"][start:end], "pages": pages, "shardInfo": info})
        first += n
    return shards


def tb(text: str, kind: str = "paragraph", page: int | None = 1, end: int | None = None,
       blocks: list | None = None) -> dict:
    block: dict = {"textBlock": {"text": text, "type": kind} | ({"blocks": blocks} if blocks else {})}
    if page is not None:
        block["pageSpan"] = {"pageStart": page, "pageEnd": end or page}
    return block


def table(rows: list[list[str]], page: int, header: int = 1, end: int | None = None) -> dict:
    def row(cells):
        return {"cells": [{"blocks": [tb(c, page=page)] if c else []} for c in cells]}

    return {"tableBlock": {"headerRows": [row(r) for r in rows[:header]], "bodyRows": [row(r) for r in rows[header:]]},
            "pageSpan": {"pageStart": page, "pageEnd": end or page}}


def layout(*blocks) -> dict:
    return {"documentLayout": {"blocks": list(blocks)}}


# --------------------------------------------------------------------------- real Layout Parser output


@pytest.fixture(scope="module")
def docai_dir(corpora_dir) -> pathlib.Path:
    d = corpora_dir / "docai"
    assert (d / "layout_parser.json").is_file(), f"missing {d / 'layout_parser.json'}"
    return d


@pytest.fixture(scope="module")
def layout_json(docai_dir) -> dict:
    return json.loads((docai_dir / "layout_parser.json").read_bytes())


@pytest.fixture(scope="module")
def layout_bundle(docai_dir) -> DocumentBundle:
    path = docai_dir / "layout_parser.json"
    return bundle_from_docai(load_docai_output(path), doc_id="pooh", file_path=str(path), sha256="s")


def _text_blocks(blocks):
    for b in blocks:
        t = b.get("textBlock")
        if t:
            yield t
            yield from _text_blocks(t.get("blocks", []))


def test_layout_parser_pages_and_parser(layout_bundle, layout_json):
    b = layout_bundle
    assert b.parser == PARSER_ID_LAYOUT
    assert "text" not in layout_json and "pages" not in layout_json  # what makes this path necessary
    # the last block sits on page 15 (second heading-1 spans 8-15); pages are 1..15, all with text
    assert b.total_pages == 15 and len(b.pages) == 15
    assert all(p.text for p in b.pages)
    check_invariants(b)
    for p in b.pages:
        assert p.text == "\n\n".join(p.paragraphs)
        assert not p.layout_metadata.has_tables  # this output has only text blocks


def test_layout_parser_headings_on_their_pages(layout_bundle):
    pages = {p.page_num: p for p in layout_bundle.pages}
    # "CHAPTER I" is a heading-1 spanning pages 1-8: its own text on page 1, first
    assert pages[1].paragraphs[0] == "CHAPTER I" and pages[1].layout_metadata.block_types[0] == "heading-1"
    # the heading-2 "WE ARE INTRODUCED" spans pages 5-8: on page 5, before its children
    assert (pages[5].paragraphs[0], pages[5].layout_metadata.block_types[0]) == ("WE ARE INTRODUCED", "heading-2")
    # page 8: the header "8" (last child of the first chapter), then the heading-1 "WINNIE-THE-POOH"
    assert pages[8].paragraphs[:2] == ["8", "WINNIE-THE-POOH"]
    assert pages[8].layout_metadata.block_types[:3] == ["header", "heading-1", "paragraph"]
    assert pages[3].layout_metadata.block_types[:2] == ["paragraph", "header"] and pages[3].paragraphs[1] == "3"
    assert "CHAPTER I" not in pages[2].text and "CHAPTER I" not in pages[8].paragraphs


def test_layout_parser_paragraph_order_and_completeness(layout_bundle, layout_json):
    # reading order on page 1: the nested paragraphs in block order
    assert layout_bundle.pages[0].paragraphs[:5] == [
        "CHAPTER I", "IN WHICH We Are Introduced to", "Winnie-the-Pooh and Some", "Bees, and the Stories Begin", "HERE"]
    assert layout_bundle.pages[0].paragraphs[-1] == "Digitized by Google"
    assert layout_bundle.pages[0].paragraphs[5].startswith("LERE is Edward Bear")  # real OCR error kept
    # every text block, exactly once, in document order
    expected = [t["text"].strip() for t in _text_blocks(layout_json["documentLayout"]["blocks"])]
    got = [par for p in layout_bundle.pages for par in p.paragraphs]
    assert len(expected) == 175 and got == expected
    kinds = [k for p in layout_bundle.pages for k in p.layout_metadata.block_types]
    assert {k: kinds.count(k) for k in set(kinds)} == {"paragraph": 167, "header": 5, "heading-1": 2, "heading-2": 1}


def test_layout_parser_every_block_on_its_page(layout_bundle, layout_json):
    def leaves(blocks):
        for b in blocks:
            t = b["textBlock"]
            if not t.get("blocks"):
                yield b["pageSpan"]["pageStart"], t["text"].strip()
            yield from leaves(t.get("blocks", []))

    for page, text in leaves(layout_json["documentLayout"]["blocks"]):
        assert text in layout_bundle.pages[page - 1].paragraphs


# --------------------------------------------------------------------------- real OCR output + local parser


@pytest.fixture(scope="module")
def invoice(docai_dir) -> DocumentBundle:
    path = docai_dir / "toolbox_invoice_test-0.json"
    docs = load_docai_output(path)
    return bundle_from_docai(docs, doc_id=default_doc_id(path, docs), file_path=str(path), sha256="s")


def test_invoice_ocr_fallback(invoice, docai_dir):
    raw = json.loads((docai_dir / "toolbox_invoice_test-0.json").read_bytes())
    assert invoice.parser == PARSER_ID_OCR and invoice.doc_id == "toolbox_invoice_test"
    assert invoice.total_pages == 1
    page = invoice.pages[0]
    check_invariants(invoice)
    assert page.text == raw["text"].strip()  # the page's own anchor covers the whole text (no startIndex: 0)
    assert len(page.paragraphs) == len(raw["pages"][0]["paragraphs"]) == 31
    assert page.paragraphs[0] == "Invoice" and page.paragraphs[1] == "DATE: 01/01/1970\nINVOICE: NO. 001"
    assert all(par in page.text for par in page.paragraphs)
    # the table: header + 6 body rows; its cells' paragraphs are typed "table", the rest are not
    assert page.layout_metadata.has_tables
    kinds = dict(zip(page.paragraphs, page.layout_metadata.block_types, strict=True))
    assert kinds["Item Description"] == kinds["$2140.00"] == kinds["Resource C"] == "table"
    assert kinds["Invoice"] == kinds["NOTES:"] == kinds["TERMS: 6 month contract\nDUE: 01/01/2025"] == "paragraph"
    assert page.layout_metadata.block_types.count("table") == 22


def test_invoice_against_local_parser(invoice, docai_dir):
    from docverify.layout.local_pdf import parse_pdf

    local = parse_pdf(docai_dir / "toolbox_invoice_test.pdf")
    assert local.total_pages == invoice.total_pages == 1
    words = lambda b: set(re.findall(r"\w+", b.full_text().lower()))  # noqa: E731
    a, b = words(local), words(invoice)
    overlap = len(a & b) / len(a | b)
    assert overlap >= 0.95, (overlap, sorted(a ^ b))
    assert local.pages[0].layout_metadata.has_tables == invoice.pages[0].layout_metadata.has_tables


def test_other_real_outputs(docai_dir):
    # Enterprise OCR v2.0 output (LaTeX math): one page, one paragraph, the whole text
    path = docai_dir / "pretrained-ocr-v2.0-2023-06-02_math_output.json"
    raw = json.loads(path.read_bytes())
    b = convert(load_docai_output(path))
    assert (b.total_pages, b.pages[0].paragraphs) == (1, [raw["text"].strip()])
    # Custom Classifier output: text, and a page without layout → the one page gets the whole text
    path = docai_dir / "custom_classifier_output.json"
    b = convert(load_docai_output(path))
    assert b.total_pages == 1 and b.pages[0].text == json.loads(path.read_bytes())["text"].strip()
    # Splitter output: 7 pages anchored into a text that was not saved → no content, said so
    err = fails("DOCAI_NO_CONTENT", load_docai_output(docai_dir / "procurement_splitter_output.json"),
                file_path=str(docai_dir / "procurement_splitter_output.json"))
    assert "procurement_splitter_output.json" in err.message and "7 page(s)" in err.message


# --------------------------------------------------------------------------- snake_case (real client)


def test_snake_case_from_the_client_gives_the_same_bundle(layout_json, layout_bundle, docai_dir):
    from google.cloud import documentai

    doc = documentai.Document.from_json(json.dumps(layout_json), ignore_unknown_fields=True)
    snake = json.loads(documentai.Document.to_json(doc, preserving_proto_field_name=True))
    assert "document_layout" in snake and "type_" in json.dumps(snake)  # proto-plus spells type as type_
    assert core(convert(snake, doc_id="pooh", file_path=layout_bundle.file_path, sha256="s")) == core(layout_bundle)
    camel = json.loads(documentai.Document.to_json(doc))  # re-emitted camelCase with every default printed
    assert core(convert(camel, doc_id="pooh", file_path=layout_bundle.file_path, sha256="s")) == core(layout_bundle)

    raw = json.loads((docai_dir / "toolbox_invoice_test-0.json").read_bytes())
    inv = documentai.Document.from_json(json.dumps(raw), ignore_unknown_fields=True)
    as_dict = documentai.Document.to_dict(inv)  # snake_case, int64 as strings, zero values printed
    assert "shard_info" in as_dict and as_dict["pages"][0]["page_number"] == 1
    assert core(convert(as_dict)) == core(convert(raw))


# --------------------------------------------------------------------------- proto3 traps, synthetic


def test_int64_as_strings_or_numbers_and_omitted_start_index():
    doc = ocr_doc([["First paragraph.", "Second one."], ["Page two."]])
    assert "startIndex" not in doc["pages"][0]["layout"]["textAnchor"]["textSegments"][0]  # omitted zero
    as_numbers = json.loads(re.sub(r'"(\d+)"', r"\1", json.dumps(doc)))
    assert isinstance(as_numbers["pages"][1]["paragraphs"][0]["layout"]["textAnchor"]["textSegments"][0]["endIndex"], int)
    a, b = convert(doc), convert(as_numbers)
    assert core(a) == core(b)
    assert [p.paragraphs for p in a.pages] == [["First paragraph.", "Second one."], ["Page two."]]
    assert a.pages[0].text == "First paragraph.\nSecond one."
    # proto3 "0" printed explicitly is the same as omitted
    doc["pages"][0]["paragraphs"][0]["layout"]["textAnchor"]["textSegments"][0]["startIndex"] = "0"
    assert core(convert(doc)) == core(a)


def test_layout_page_span_as_strings_and_missing_page_start():
    doc = layout(tb("Title", "heading-1", page=None) | {"pageSpan": {"pageStart": "1", "pageEnd": "1"}},
                 tb("continues", page=None) | {"pageSpan": {"pageEnd": "2"}},  # pageStart omitted
                 tb("no span at all", page=None),
                 tb("page three", page=3))
    b = convert(doc)
    assert b.total_pages == 3
    # an omitted pageStart takes the page of the block before it (1), within its pageEnd (2)
    assert b.pages[0].paragraphs == ["Title", "continues", "no span at all"]
    assert b.pages[1].text == "" and b.pages[1].paragraphs == []  # page 2 exists, empty
    assert b.pages[2].paragraphs == ["page three"]


def test_multi_page_blocks_and_contiguous_pages():
    doc = layout(tb("Heading", "heading-1", page=1, end=4, blocks=[
        tb("on page two", page=2), tb("a leaf over a page break", page=2, end=3), tb("Footer text", "footer", page=4)]))
    b = convert(doc)
    assert b.total_pages == 4
    assert [p.paragraphs for p in b.pages] == [["Heading"], ["on page two", "a leaf over a page break"], [],
                                               ["Footer text"]]
    assert b.pages[3].layout_metadata.block_types == ["footer"]
    check_invariants(b)


def test_tables_rendered_and_flagged():
    doc = layout(tb("Results", "heading-2", page=1),
                 table([["Test", "Value", "Unit"], ["Hemoglobin", "13.2", "g/dL"], ["WBC", "", "10^3/uL"]], page=2),
                 tb("After the table", page=2))
    b = convert(doc)
    assert b.pages[1].paragraphs == ["Test | Value | Unit\nHemoglobin | 13.2 | g/dL\nWBC |  | 10^3/uL",
                                     "After the table"]
    assert b.pages[1].layout_metadata.block_types == ["table", "paragraph"]
    assert [p.layout_metadata.has_tables for p in b.pages] == [False, True]
    check_invariants(b)


def test_table_over_a_page_break_and_caption():
    t = table([["H1", "H2"], ["a", "b"], ["c", "d"]], page=3, end=4)
    t["tableBlock"]["caption"] = "Table 1"
    t["tableBlock"]["bodyRows"][1]["cells"][0]["blocks"][0]["pageSpan"] = {"pageStart": 4, "pageEnd": 4}
    b = convert(layout(tb("x", page=1), t))
    assert b.total_pages == 4
    assert b.pages[2].paragraphs == ["Table 1", "H1 | H2\na | b"]
    assert b.pages[2].layout_metadata.block_types == ["caption", "table"]
    assert b.pages[3].paragraphs == ["c | d"] and b.pages[3].layout_metadata.block_types == ["table"]
    assert [p.layout_metadata.has_tables for p in b.pages] == [False, False, True, True]


def test_nested_table_in_list_and_nested_list():
    entry_with_table = {"blocks": [tb("second item", page=2),
                                   table([["Gene", "Variant"], ["BRCA1", "c.68_69delAG"]], page=2)]}
    nested_list = {"listBlock": {"type": "unordered", "listEntries": [{"blocks": [tb("inner", page=2)]}]},
                   "pageSpan": {"pageStart": 2, "pageEnd": 2}}
    doc = layout(tb("Intro", page=1),
                 {"listBlock": {"type": "ordered", "listEntries": [
                     {"blocks": [tb("first item", page=1), tb("more of it", page=1)]},
                     entry_with_table,
                     {"blocks": [tb("third", page=2), nested_list]}]},
                  "pageSpan": {"pageStart": 1, "pageEnd": 2}})
    b = convert(doc)
    assert b.pages[0].paragraphs == ["Intro", "first item more of it"]
    assert b.pages[0].layout_metadata.block_types == ["paragraph", "list_item"]
    assert b.pages[1].paragraphs == ["second item", "Gene | Variant\nBRCA1 | c.68_69delAG", "third", "inner"]
    assert b.pages[1].layout_metadata.block_types == ["list_item", "table", "list_item", "list_item"]
    assert [p.layout_metadata.has_tables for p in b.pages] == [False, True]


def test_nested_table_inside_a_table_cell_is_flattened():
    inner = table([["x", "y"]], page=1, header=0)
    outer = table([["A", "B"]], page=1)
    outer["tableBlock"]["headerRows"][0]["cells"][1]["blocks"].append(inner)
    b = convert(layout(outer))
    assert b.pages[0].paragraphs == ["A | B x | y"]


def test_image_block_text_and_blank_lines_inside_a_block():
    doc = layout({"imageBlock": {"imageText": "Figure 2: CT of the chest", "mimeType": "image/png"},
                  "pageSpan": {"pageStart": 1, "pageEnd": 1}},
                 tb("line one\n\n\nline two\r\n\tindented  ", page=1))
    p = convert(doc).pages[0]
    assert p.paragraphs == ["Figure 2: CT of the chest", "line one\nline two\n indented"]
    assert p.text.split("\n\n") == p.paragraphs


def test_empty_documents_are_no_content():
    for doc in ({}, {"documentLayout": {}}, {"documentLayout": {"blocks": []}}, {"text": "", "pages": []},
                layout(tb("   ", page=1), tb("", page=2)), {"document": {}}):
        err = fails("DOCAI_NO_CONTENT", doc, file_path="gs://b/out/empty.json")
        assert "empty.json" in err.message and err.file == "gs://b/out/empty.json"
    fails("DOCAI_NO_CONTENT", [])


def test_text_without_pages_is_one_page_and_process_response_is_unwrapped():
    b = convert({"document": {"text": "Just text.\n\nSecond para.\n"}, "humanReviewStatus": {}})
    assert (b.total_pages, b.pages[0].paragraphs, b.parser) == (1, ["Just text.", "Second para."], PARSER_ID_OCR)


def test_ocr_page_numbers_order_and_gaps():
    doc = ocr_doc([["one"], ["two"], ["four"]])
    doc["pages"][2]["pageNumber"] = 4
    del doc["pages"][0]["pageNumber"]  # omitted → follows the previous page (here: 1)
    b = convert(doc)
    assert [p.text for p in b.pages] == ["one", "two", "", "four"]


def test_wrong_field_types_are_invalid_json():
    for doc in ({"documentLayout": {"blocks": "not a list"}}, layout(tb("x") | {"pageSpan": {"pageStart": "one"}}),
                {"text": 5, "pages": []}, {"text": "abc", "pages": [{"layout": {"textAnchor": {"textSegments": [
                    {"endIndex": True}]}}}]}, layout("a block that is a string")):
        err = fails("DOCAI_INVALID_JSON", doc, file_path="/tmp/bad.json")
        assert "bad.json" in err.message
    fails("DOCAI_INVALID_JSON", "not a dict")
    fails("DOCAI_INVALID_JSON", [{"text": "x"}, 3])


def test_too_many_pages_fails_fast():
    t0 = time.perf_counter()
    err = fails("TOO_MANY_PAGES", layout(tb("x", page=1, end=10**9)), file_path="gs://b/huge.json")
    assert time.perf_counter() - t0 < 1.0 and "huge.json" in err.message and str(MAX_PAGES) in err.message
    doc = ocr_doc([["p"]])
    doc["pages"][0]["pageNumber"] = str(MAX_PAGES + 1)
    fails("TOO_MANY_PAGES", doc)
    ok = layout(tb("x", page=MAX_PAGES))
    assert convert(ok).total_pages == MAX_PAGES


def test_processor_version_and_parser_override():
    rev = {"revisions": [{"processor": "projects/1/locations/us/processors/abc/processorVersions/"
                                       "pretrained-layout-parser-v1.0-2024-06-03", "id": "r1"}]}
    assert convert(layout(tb("x")) | rev).parser == f"{PARSER_ID_LAYOUT}@pretrained-layout-parser-v1.0-2024-06-03"
    assert convert(ocr_doc([["x"]]) | {"revisions": [{"processor": "projects/1/locations/us/processors/abc"}]}
                   ).parser == PARSER_ID_OCR
    assert convert(layout(tb("x")) | rev, parser="document_ai:custom").parser == "document_ai:custom"


# --------------------------------------------------------------------------- shards


def test_ocr_shards_in_any_order_equal_the_whole():
    whole = ocr_doc([["Patient: A", "History"], ["Findings"], ["Impression", "Plan"], ["Signature"]])
    shards = shard_ocr(whole, [1, 2, 1])
    assert shards[1]["shardInfo"] == {"shardCount": "3", "shardIndex": "1", "textOffset": str(len("Patient: A\nHistory\n"))}
    assert "startIndex" not in shards[1]["pages"][0]["layout"]["textAnchor"]["textSegments"][0]  # 0 in its shard
    expected = core(convert(whole))
    for order in ([0, 1, 2], [2, 0, 1], [1, 2, 0]):
        assert core(convert([shards[i] for i in order])) == expected


def test_layout_shards_in_wrong_order(layout_json, layout_bundle):
    blocks = layout_json["documentLayout"]["blocks"]
    shards = [{"documentLayout": {"blocks": [b]}, "shardInfo": {"shardCount": "2"} | ({"shardIndex": str(i)} if i else {})}
              for i, b in enumerate(blocks)]
    merged = convert(list(reversed(shards)), doc_id="pooh", file_path=layout_bundle.file_path, sha256="s")
    assert core(merged) == core(layout_bundle)


def test_anchor_running_past_its_shard_resolves_in_the_next():
    shards = [{"text": "AAAA\nBB", "shardInfo": {"shardCount": "2"},
               "pages": [{"pageNumber": 1, "layout": {"textAnchor": {"textSegments": [seg(0, 8)]}}}]},
              {"text": "B\nCCC\n", "shardInfo": {"shardCount": "2", "shardIndex": "1", "textOffset": "7"},
               "pages": [{"pageNumber": 2, "layout": {"textAnchor": {"textSegments": [seg(2, 6)]}}}]}]
    assert [p.text for p in convert(shards).pages] == ["AAAA\nBBB", "CCC"]


def test_missing_shard():
    shards = shard_ocr(ocr_doc([["a"], ["b"], ["c"]]), [1, 1, 1])
    err = fails("DOCAI_SHARDS_MISSING", [shards[2], shards[0]], file_path="gs://b/out/op/0/report-0.json")
    assert "shard(s) 1 are missing" in err.message and "report-0.json" in err.message
    err = fails("DOCAI_SHARDS_MISSING", shards[1])  # one shard of three, alone
    assert "0, 2" in err.message


def test_inconsistent_shards():
    shards = shard_ocr(ocr_doc([["a"], ["b"], ["c"]]), [1, 1, 1])
    fails("DOCAI_SHARDS_INCONSISTENT", [shards[0], shards[1], copy.deepcopy(shards[1])])  # duplicate index
    other = copy.deepcopy(shards[2])
    other["shardInfo"]["shardCount"] = "4"
    fails("DOCAI_SHARDS_INCONSISTENT", [shards[0], shards[1], other])
    bad_offset = copy.deepcopy(shards[2])
    bad_offset["shardInfo"]["textOffset"] = "1"
    err = fails("DOCAI_SHARDS_INCONSISTENT", [shards[0], shards[1], bad_offset])
    assert "textOffset 1" in err.message
    fails("DOCAI_SHARDS_INCONSISTENT", [ocr_doc([["a"]]), ocr_doc([["b"]])])  # two unsharded documents


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.text(alphabet="abcXYZ 0.:é\u00a0", min_size=1, max_size=12)
                         .filter(lambda s: s.strip() == s and s), min_size=0, max_size=3), min_size=1, max_size=7)
       .filter(lambda pages: any(pages)), st.randoms(use_true_random=False))
def test_property_sharding_never_changes_the_bundle(pages, rnd):
    whole = ocr_doc(pages)
    n = len(pages)
    cuts = sorted(rnd.sample(range(1, n), rnd.randint(0, n - 1))) if n > 1 else []
    groups = [b - a for a, b in zip([0, *cuts], [*cuts, n], strict=True)]
    shards = shard_ocr(whole, groups)
    rnd.shuffle(shards)
    assert core(convert(shards)) == core(convert(whole))


# --------------------------------------------------------------------------- files and folders


class MinimalPath:
    """A pathlib-like object with only name / iterdir / read_bytes (like an object-store path)."""

    __slots__ = ("_p",)

    def __init__(self, p: pathlib.Path):
        self._p = p

    @property
    def name(self) -> str:
        return self._p.name

    def iterdir(self):
        return (MinimalPath(c) for c in self._p.iterdir())

    def read_bytes(self) -> bytes:
        return self._p.read_bytes()

    def __str__(self) -> str:
        return f"mem://{self._p.name}"


def write_shards(folder: pathlib.Path, shards: list[dict], name: str = "report") -> pathlib.Path:
    folder.mkdir(parents=True, exist_ok=True)
    for s in shards:
        k = int(s["shardInfo"].get("shardIndex", 0))
        (folder / f"{name}-{k}.json").write_text(json.dumps(s))
    return folder


def test_load_folder_of_shards_natural_order_any_pathlike(tmp_path):
    whole = ocr_doc([[f"page {i}"] for i in range(1, 12)])
    shards = shard_ocr(whole, [1] * 11)
    folder = write_shards(tmp_path / "op" / "0", shards)
    (folder / "notes.txt").write_text("not a shard")
    for root in (folder, str(folder), MinimalPath(folder)):
        docs = load_docai_output(root)
        assert [int(d["shardInfo"].get("shardIndex", 0)) for d in docs] == list(range(11))  # -10 after -9
        b = convert(docs)
        assert [p.text for p in b.pages] == [f"page {i}" for i in range(1, 12)]
    assert default_doc_id(folder) == "0"
    h = hashlib.sha256()
    for i in range(11):
        h.update((folder / f"report-{i}.json").read_bytes())
    assert docai_output_sha256(folder) == docai_output_sha256(MinimalPath(folder)) == h.hexdigest()


def test_load_single_file_and_doc_id(tmp_path, docai_dir):
    path = docai_dir / "toolbox_invoice_test-0.json"
    docs = load_docai_output(MinimalPath(path))
    assert len(docs) == 1 and docs[0]["shardInfo"] == {"shardCount": "1"}
    assert default_doc_id(path, docs) == "toolbox_invoice_test"  # the shard suffix batch output adds
    assert default_doc_id(docai_dir / "layout_parser.json", load_docai_output(docai_dir / "layout_parser.json")) \
        == "layout_parser"
    p = tmp_path / "report-2024.json"
    p.write_text(json.dumps(ocr_doc([["x"]])))
    assert default_doc_id(p, load_docai_output(p)) == "report-2024"  # no shardInfo: the name stays


def test_load_errors_name_the_file(tmp_path):
    cases = {"truncated.json": b'{"text": "abc", "pages": [', "empty.json": b"", "list.json": b"[1, 2]",
             "binary.json": b"\xff\xfe\x00garbage"}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ParseError) as ei:
            load_docai_output(tmp_path / name)
        assert ei.value.code == "DOCAI_INVALID_JSON" and name in ei.value.message, name
        assert ei.value.file == str(tmp_path / name)
    with pytest.raises(ParseError) as ei:
        load_docai_output(tmp_path / "nope")
    assert ei.value.code == "UNSUPPORTED" and "nope" in ei.value.message
    (tmp_path / "empty_dir").mkdir()
    with pytest.raises(ParseError) as ei:
        load_docai_output(tmp_path / "empty_dir")
    assert ei.value.code == "DOCAI_NO_CONTENT" and "empty_dir" in ei.value.message
    mixed = tmp_path / "mixed"
    write_shards(mixed, shard_ocr(ocr_doc([["a"], ["b"]]), [1, 1]), "one")
    write_shards(mixed, shard_ocr(ocr_doc([["c"], ["d"]]), [1, 1]), "two")
    with pytest.raises(ParseError) as ei:
        load_docai_output(mixed)
    assert ei.value.code == "DOCAI_SHARDS_INCONSISTENT" and "2 different documents" in ei.value.message


def test_module_has_no_airflow_or_google_import():
    src = pathlib.Path(docai.__file__).read_text()
    assert not re.search(r"^\s*(from|import)\s+(airflow|google)", src, re.M)


# --------------------------------------------------------------------------- CLI


def run_cli(*args) -> tuple[int, dict]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "plugins")}
    p = subprocess.run([sys.executable, "-m", "docverify", "parse", *map(str, args)], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=120)
    assert "Traceback" not in p.stderr, p.stderr
    return p.returncode, json.loads(p.stdout)


@pytest.mark.slow
def test_cli_parse_docai_outputs(tmp_path, docai_dir):
    path = docai_dir / "layout_parser.json"
    code, out = run_cli(path)
    assert code == 0
    b = DocumentBundle.model_validate(out)
    assert (b.doc_id, b.total_pages, b.parser) == ("layout_parser", 15, PARSER_ID_LAYOUT)
    assert b.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert b.pages[7].paragraphs[:2] == ["8", "WINNIE-THE-POOH"]
    # a folder of shards, written in the batch layout
    folder = write_shards(tmp_path / "op123" / "doc7", shard_ocr(ocr_doc([["one"], ["two"], ["three"]]), [2, 1]))
    code, out = run_cli(folder)
    assert code == 0 and out["doc_id"] == "doc7" and [p["text"] for p in out["pages"]] == ["one", "two", "three"]
    # the same folder with a shard removed
    (folder / "report-1.json").unlink()
    code, out = run_cli(folder)
    assert code == 2 and out["error"] == "DOCAI_SHARDS_MISSING" and "doc7" in out["message"]
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    code, out = run_cli(bad)
    assert code == 2 and out == {"error": "DOCAI_INVALID_JSON", "message": out["message"], "file": str(bad)}
    assert "bad.json" in out["message"]

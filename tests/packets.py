"""Where a night's packet of a document lies: ``sme_packets/sme_packet_<night>_<doc_id>_<sha10>``
(one review per night and content), for tests that open the files as a person would."""

from __future__ import annotations

import pathlib
import re


def packet_name(names, doc_id: str, suffix: str = ".json", night: str | None = None) -> str:
    night_re = re.escape(night) if night else r"\d{4}-\d\d-\d\d"
    pattern = re.compile(rf"sme_packet_{night_re}_{re.escape(doc_id)}(_[0-9a-f]{{10}})?{re.escape(suffix)}")
    found = sorted(n for n in names if pattern.fullmatch(n))
    assert len(found) == 1, f"expected one packet of {doc_id} ({suffix}), found {found}"
    return found[0]


def packet_file(root: pathlib.Path, doc_id: str, suffix: str = ".json", night: str | None = None) -> pathlib.Path:
    folder = pathlib.Path(root) / "sme_packets"
    names = [p.name for p in folder.iterdir()] if folder.is_dir() else []
    return folder / packet_name(names, doc_id, suffix, night)


def has_packet(root: pathlib.Path, doc_id: str, night: str | None = None) -> bool:
    folder = pathlib.Path(root) / "sme_packets"
    night_re = re.escape(night) if night else r"\d{4}-\d\d-\d\d"
    pattern = re.compile(rf"sme_packet_{night_re}_{re.escape(doc_id)}(_[0-9a-f]{{10}})?\.json")
    return folder.is_dir() and any(pattern.fullmatch(p.name) for p in folder.iterdir())

"""What the plugin's pages share: response headers for pages holding PHI, the style, the id check."""

from __future__ import annotations

import re

from fastapi import HTTPException, Request

SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
HEADERS = {"Cache-Control": "no-store", "X-Frame-Options": "SAMEORIGIN", "X-Content-Type-Options": "nosniff",
           "Content-Security-Policy": "default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
                                      "frame-ancestors 'self'"}

STYLE = ("body{font-family:system-ui,sans-serif;margin:1.2em 2em;color:#1d1d1f}td,th{padding:.3em .8em;text-align:left}"
         "tr:nth-child(even){background:#f4f4f4}.muted{color:#666}.ok{color:#176d2c}.warn{color:#8a4b00}"
         ".sev.BLOCKER,.sev.ERROR{color:#b00020;font-weight:bold}.sev.MAJOR{color:#8a4b00}"
         ".button,button{display:inline-block;padding:.45em 1em;border:1px solid #345;border-radius:4px;"
         "background:#eef3f8;color:#123;text-decoration:none;font-size:1em;cursor:pointer}"
         "button.link{border:0;background:none;color:#0645ad;padding:0;text-decoration:underline}"
         "form.inline{display:inline}.filters{margin:.6em 0}.filters label{margin-right:.8em}"
         # the review workspace's two panes: a div only (:where keeps the specificity of .review), never
         # a link of class review (the trail's: a window-tall link after every packet step, issue 42)
         ".review:where(div){display:flex;gap:1.2em;height:calc(100vh - 2.6em)}"
         ".left{flex:1 1 60%;overflow:auto;min-width:0}"
         ".left iframe{width:100%;height:70vh;border:1px solid #ccc}.right{flex:0 0 25em;overflow:auto;"
         "border-left:1px solid #ddd;padding-left:1em}.right label{display:block;margin:.4em 0}"
         ".choice{padding:.25em 0}.pages td{padding:.1em .4em}.refused{background:#fde8e8;border:1px solid #b00020;"
         "padding:.6em;margin-bottom:.6em}fieldset{border:1px solid #ccc}h1{font-size:1.4em}")


def check_id(doc_id: str) -> None:
    """A review or document id before it becomes part of a path (fullmatch: '$' passes a final newline)."""
    if not SAFE_ID.fullmatch(doc_id) or ".." in doc_id:
        raise HTTPException(status_code=400, detail="not a document id")


def wants_html(request: Request) -> bool:
    return "text/html" in request.headers.get("accept", "")

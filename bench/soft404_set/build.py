"""Rebuild ``notfound/``: real "not found" pages, as the software that ships them renders them,
with ``{{path}}`` where a page repeats the requested path and ``{{host}}`` the host. Run once
by hand (the pages are committed); the sources are local files of installed or downloaded packages::

    apt-get download apache2-data && dpkg-deb -x apache2-data_*.deb /tmp/apache2-data
    .venv/bin/python bench/soft404_set/build.py --apache /tmp/apache2-data \\
        --rustdoc ~/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/share/doc/rust/html \\
        --pywb .venv-pywb/lib/python3.11/site-packages/pywb/templates
"""

from __future__ import annotations

import argparse
import http.server
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent / "notfound"


def apache(root: Path) -> dict[str, str]:
    """Apache httpd's multilingual HTTP_NOT_FOUND (Debian's apache2-data), one page per
    language, with its server-side includes done (no Referer: the "else" branch)."""
    err = root / "usr/share/apache2/error"
    top = (err / "include/top.html").read_text(encoding="utf-8")
    bottom = (err / "include/bottom.html").read_text(encoding="utf-8")
    pages = {}
    var = (err / "HTTP_NOT_FOUND.html.var").read_text(encoding="utf-8")
    for lang, body in re.findall(r"Body:-+(\S+?)--\n(.*?)-+\1--", var, re.S):
        title = re.search(r'var="TITLE" value="([^"]*)"', body).group(1)  # type: ignore[union-attr]
        html = re.sub(r"<!--#if expr=[^>]*-->.*?<!--#else -->", "", body, flags=re.S)
        html = html.replace('<!--#include virtual="include/top.html" -->', top)
        html = html.replace('<!--#include virtual="include/bottom.html" -->', bottom)
        html = re.sub(r'<!--#echo encoding="none" var="REDIRECT_STATUS" -->', "404", html)
        html = html.replace('<!--#echo var="SERVER_NAME" -->', "{{host}}")
        html = html.replace('<!--#echo var="SERVER_SOFTWARE" -->', "Apache/2.4.71 (Debian)")
        html = re.sub(r'<!--#echo encoding="none" var="TITLE" -->', title, html)
        html = re.sub(r'<!--#echo var="CONTENT_LANGUAGE" -->', lang, html)
        html = re.sub(r"<!--#.*?-->", "", html, flags=re.S)
        html = re.sub(r"<\?xml[^>]*\?>", "", html)
        pages[f"apache-{lang}"] = html.strip() + "\n"
    return pages


def pywb(templates: Path) -> str:
    """pywb's "URL Not Found" inside its base template, the URL echoed."""
    base = (templates / "base.html").read_text(encoding="utf-8")
    page = (templates / "not_found.html").read_text(encoding="utf-8")
    blocks = dict(re.findall(r"{% block (\w+) %}(.*?){% endblock", page, re.S))
    out = base
    for name in ("title", "body"):
        block = r"{% block " + name + r" %}.*?{% endblock[^%]*%}"
        out = re.sub(block, blocks[name], out, count=1, flags=re.S)
    out = out.replace("{{ url }}", "{{path}}")
    out = re.sub(r"{% if .*?{% endif %}", "", out, flags=re.S)
    out = re.sub(r"{{ _\('([^']*)'\) }}", r"\1", out)
    out = re.sub(r"{%.*?%}|{{.*?}}(?<!{{path}})", "", out.replace("{{path}}", "\0"), flags=re.S)
    return out.replace("\0", "{{path}}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--apache", type=Path, required=True)
    ap.add_argument("--rustdoc", type=Path, required=True)
    ap.add_argument("--pywb", type=Path, required=True)
    args = ap.parse_args()
    pages = apache(args.apache)
    pages["rustdoc"] = (args.rustdoc / "not_found.html").read_text(encoding="utf-8")
    pages["pywb"] = pywb(args.pywb)
    pages["python-http-server"] = http.server.DEFAULT_ERROR_MESSAGE % {
        "code": 404,
        "message": "File not found",
        "explain": "Nothing matches the given URI",
    }
    # twisted.web.resource.NoResource, as Twisted 26.10 renders it
    pages["twisted-noresource"] = (
        "\n<html>\n  <head><title>404 - No Such Resource</title></head>\n  <body>\n"
        "    <h1>No Such Resource</h1>\n    <p>Sorry. No luck finding that resource.</p>\n"
        "  </body>\n</html>\n"
    )
    HERE.mkdir(exist_ok=True)
    for name, html in sorted(pages.items()):
        (HERE / f"{name}.html").write_text(html, encoding="utf-8")
    print(f"{len(pages)} pages in {HERE}")


if __name__ == "__main__":
    main()

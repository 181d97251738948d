"""The near-duplicate pipeline in a real Scrapy crawler, fed real HTML; the explain command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from scrapy.exceptions import NotConfigured
from scrapy.utils.test import get_crawler

from crawler import signals as crawler_signals
from crawler.commands.neardup import format_explanation
from crawler.content.neardup_explain import explain
from crawler.items import PageItem
from crawler.pipelines.neardup import NearDuplicatePipeline
from devsite.testset import LabelledSet, build_labelled_set, page_item

ROOT = Path(__file__).resolve().parents[1]


def _pipeline(**settings: Any) -> NearDuplicatePipeline:
    crawler = get_crawler(settings_dict=settings)
    pipeline = NearDuplicatePipeline.from_crawler(crawler)
    pipeline.open_spider()
    return pipeline


@pytest.fixture(scope="module")
def labelled() -> LabelledSet:
    return build_labelled_set(pages=30, variants_per_page=6, seed=5)


def test_mirror_counter_and_template_pages(labelled: LabelledSet) -> None:
    pipeline = _pipeline()
    originals = [page_item(p.url, p.html) for p in labelled.originals]
    for item in originals:  # different pages, one template per site: none flagged
        pipeline.process_item(item)
        assert "duplicate_of" not in item, item["url"]
        assert len(item["content_fingerprint"]) == 32
    for page in labelled.variants:
        if page.kind not in ("mirror", "chrome", "timestamp"):
            continue
        item = pipeline.process_item(page_item(page.url, page.html))
        original = labelled.originals[page.original or 0].url
        assert item["duplicate_of"] == original, (page.kind, page.url)
        # mirrors and re-rendered chrome (counter, date, quote) have the very same main text
        assert item["similarity"] == 1.0
    stats = pipeline.crawler.stats.get_stats()
    assert stats["neardup/new"] == len(originals)
    assert stats["neardup/exact"] >= 1


def test_edited_pages_are_near_duplicates(labelled: LabelledSet) -> None:
    pipeline = _pipeline()
    for page in labelled.originals:
        pipeline.process_item(page_item(page.url, page.html))
    edited = [p for p in labelled.variants if p.kind == "edit"]
    assert edited
    for page in edited:
        item = pipeline.process_item(page_item(page.url, page.html))
        assert item.get("duplicate_of") == labelled.originals[page.original or 0].url
        assert 0.5 <= item["similarity"] <= 1.0


def test_scrapy_items_and_fallback_to_visible_text(labelled: LabelledSet) -> None:
    pipeline = _pipeline()
    page = labelled.originals[0]
    fields = page_item(page.url, page.html)
    item = PageItem(**fields)
    pipeline.process_item(item)
    mirror = PageItem(**page_item("http://elsewhere.test/x", page.html))
    pipeline.process_item(mirror)
    assert mirror["duplicate_of"] == page.url and mirror["similarity"] == 1.0
    # an item without main text (another spider's): the visible text is compared instead
    plain = PageItem(**{k: v for k, v in fields.items() if k != "main_text"})
    pipeline.process_item(plain)
    again = PageItem(**{k: v for k, v in fields.items() if k != "main_text"})
    again["url"] = again["final_url"] = "http://third.test/x"
    pipeline.process_item(again)
    assert again["duplicate_of"] == page.url


def test_not_modified_errors_and_noindex(labelled: LabelledSet) -> None:
    pipeline = _pipeline()
    page = labelled.originals[1]
    item_304 = {"url": page.url, "final_url": page.url, "status": 304, "text": ""}
    assert pipeline.process_item(item_304) == item_304  # untouched
    assert len(pipeline.detector) == 0
    noindex = page_item(page.url, page.html)
    noindex["noindex"] = True
    pipeline.process_item(noindex)
    assert "content_fingerprint" in noindex
    # a noindex page never becomes the original others are aliased to
    copy = pipeline.process_item(page_item("http://copy.test/1", page.html))
    assert "duplicate_of" not in copy
    # ...while an indexable page is: the first copy is the original of the next one
    again = pipeline.process_item(page_item("http://copy.test/2", page.html))
    assert again["duplicate_of"] == "http://copy.test/1"


def test_host_ratio_and_penalty_for_the_frontier(labelled: LabelledSet) -> None:
    pipeline = _pipeline(NEARDUP_HOST_MIN_PAGES=3)
    answers = pipeline.crawler.signals.send_catch_log(crawler_signals.host_penalty_wanted)
    penalty = next(r for _, r in answers if callable(r))  # what the scheduler asks for
    for page in labelled.originals[:6]:
        pipeline.process_item(page_item(page.url, page.html))
        host = page.url.split("/")[2]
        pipeline.process_item(page_item(page.url.replace(host, "mirror.test"), page.html))
    assert pipeline.host_duplicate_ratio("mirror.test") == 1.0
    assert penalty("mirror.test") == 2
    assert penalty(labelled.originals[0].url.split("/")[2]) == 0
    assert penalty("unknown.test") == 0
    # no pipeline, no answer: the prioritizer runs without a penalty
    assert get_crawler().signals.send_catch_log(crawler_signals.host_penalty_wanted) == []


def test_settings_and_disabling() -> None:
    pipeline = _pipeline(NEARDUP_SHINGLE_SIZE=4, NEARDUP_NUM_PERM=64, NEARDUP_THRESHOLD=0.7)
    det = pipeline.detector
    assert (det.shingle_size, det.num_perm, det.threshold) == (4, 64, 0.7)
    with pytest.raises(NotConfigured):
        NearDuplicatePipeline.from_crawler(get_crawler(settings_dict={"NEARDUP_ENABLED": False}))


def test_state_survives_a_resumed_job(tmp_path: Path, labelled: LabelledSet) -> None:
    page = labelled.originals[2]
    first = _pipeline(JOBDIR=str(tmp_path))
    first.process_item(page_item(page.url, page.html))
    first.close_spider()
    assert (tmp_path / "neardup.journal").exists()
    second = _pipeline(JOBDIR=str(tmp_path))
    item = second.process_item(page_item("http://mirror.test/p", page.html))
    assert item["duplicate_of"] == page.url
    second.close_spider()
    third = _pipeline(JOBDIR=str(tmp_path))  # the journal grew by the duplicate: both known
    assert len(third.detector) == 2 and third.detector.originals == 1
    other = _pipeline(JOBDIR=str(tmp_path), NEARDUP_THRESHOLD=0.9)  # other settings: afresh
    assert len(other.detector) == 0


_KILLED_WORKER = """
import sys, time
from scrapy.utils.test import get_crawler
from crawler.pipelines.neardup import NearDuplicatePipeline
from devsite.testset import build_labelled_set, page_item
pipeline = NearDuplicatePipeline.from_crawler(
    get_crawler(settings_dict={"JOBDIR": sys.argv[1], "NEARDUP_JOURNAL_INTERVAL": 0.2}))
pipeline.open_spider()
for page in build_labelled_set(pages=30, variants_per_page=6, seed=5).originals[:20]:
    pipeline.process_item(page_item(page.url, page.html))
time.sleep(0.3)
pipeline.process_item(page_item("http://late.test/x", "<p>one more page to flush</p>"))
print("ready", flush=True)
time.sleep(60)
"""


def test_journal_survives_kill_9(tmp_path: Path, labelled: LabelledSet) -> None:
    """A worker killed with SIGKILL (no close) loses at most the last interval's pages; a torn
    record at the end is cut off, and the resumed crawl appends after it."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WORKER, str(tmp_path)], cwd=ROOT,
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
    finally:
        proc.kill()
        proc.wait()
    journal = tmp_path / "neardup.journal"
    with journal.open("ab") as f:
        f.write(b"\x97\xa1o")  # the start of a record a kill cut short
    resumed = _pipeline(JOBDIR=str(tmp_path))
    assert resumed.detector.originals >= 20
    page = labelled.originals[3]
    item = resumed.process_item(page_item("http://mirror.test/again", page.html))
    assert item["duplicate_of"] == page.url
    resumed.close_spider()
    assert len(_pipeline(JOBDIR=str(tmp_path)).detector) == len(resumed.detector)


# --- the explain command ---------------------------------------------------------------------


def test_explain_report(labelled: LabelledSet) -> None:
    from crawler.content.maintext import main_text

    page = labelled.originals[3]
    edit = next(p for p in labelled.variants if p.kind == "edit" and p.original == 3)
    report = format_explanation("a.html", "b.html", explain(main_text(page.html),
                                                             main_text(edit.html)))
    assert "FLAGGED" in report and "estimated similarity" in report
    assert "exact similarity" in report and "words" in report
    other = labelled.originals[4]
    report = format_explanation("a.html", "c.html", explain(main_text(page.html),
                                                             main_text(other.html)))
    assert "not flagged" in report


def test_explain_command_on_two_files(tmp_path: Path, labelled: LabelledSet) -> None:
    page = labelled.originals[5]
    mirror = next(p for p in labelled.variants if p.kind == "chrome" and p.original == 5)
    a, b = tmp_path / "a.html", tmp_path / "b.html"
    a.write_text(page.html, encoding="utf-8")
    b.write_text(mirror.html, encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-m", "scrapy", "neardup", str(a), str(b)],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "main text:" in out.stdout
    assert "exact duplicate (same normalized main text): yes" in out.stdout
    assert "FLAGGED" in out.stdout
    missing = subprocess.run(
        [sys.executable, "-m", "scrapy", "neardup", str(a), str(tmp_path / "nope.html")],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )
    assert missing.returncode == 1 and "cannot read" in missing.stderr


# --- one decoding: what the command explains is what the pipeline compared -------------------

# Pages whose encoding only a <meta> declares, in the two ways libxml2 and browsers disagree on:
# "gb2312" is read as GBK by browsers and Scrapy (the article's last characters are GBK only),
# "iso-8859-1" as windows-1252 (curly quotes, the euro sign, the ligature).
_DECLARED_ONLY_IN_META = [
    (
        "gb2312",
        "gbk",
        "这是一个关于网页编码的测试句子\uff0c文章的内容在这里结束\uff1a镕 喆 堃 昇 玥。" * 3,
    ),
    (
        "iso-8859-1",
        "cp1252",
        "The \u201cmenu\u201d costs 5 \u20ac \u2014 an \u0153uvre of the caf\xe9 next door, "
        "open every day of the week, with a terrace in summer and a fire in winter.",
    ),
]


@pytest.mark.parametrize(("charset", "codec", "article"), _DECLARED_ONLY_IN_META)
def test_command_explains_the_text_the_pipeline_compared(
    tmp_path: Path, charset: str, codec: str, article: str
) -> None:
    from scrapy import Request
    from scrapy.http import HtmlResponse

    from tests.test_spider import make_spider

    html = (
        f'<!DOCTYPE html><html><head><meta charset="{charset}"><title>Page</title></head>'
        f"<body><nav><a href='/'>Home</a> <a href='/a'>About</a></nav>"
        f"<main><h1>Heading</h1><p>{article}</p></main><footer>Footer</footer></body></html>"
    )
    body = html.encode(codec)
    url = "http://encoded.test/page"
    # What the crawl does: Scrapy's response (no charset in the header), the spider's item,
    # the pipeline's fingerprint of the item's main text.
    spider = make_spider(tmp_path, settings={"NEARDUP_ENABLED": True})
    response = HtmlResponse(
        url, body=body, headers={"Content-Type": "text/html"}, request=Request(url), status=200
    )
    item = next(out for out in spider.parse(response) if isinstance(out, PageItem))
    _pipeline().process_item(item)
    assert article in item["main_text"]  # the whole article, decoded right
    # What the command does with the same bytes in a file.
    page = tmp_path / "page.html"
    page.write_bytes(body)
    out = subprocess.run(
        [sys.executable, "-m", "scrapy", "neardup", "--text", str(page), str(page)],
        cwd=ROOT, capture_output=True, text=True, encoding="utf-8", timeout=60, check=False,
    )
    assert out.returncode == 0, out.stderr
    assert f"--- main text of A ---\n{item['main_text']}\n" in out.stdout
    assert f"fingerprint {item['content_fingerprint'][:16]}" in out.stdout

"""The content analysis's near-duplicate judge and the pipeline that counts its verdicts, in a
real Scrapy crawler, fed real HTML; the explain command."""

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
from crawler.pipelines.neardup import NearDuplicatePipeline
from crawler.spiders.analysis import near_duplicate_judge
from crawler.spiders.site_items import PageItem
from devsite.testset import LabelledSet, build_labelled_set, page_item

ROOT = Path(__file__).resolve().parents[1]


class Judging:
    """A crawl's near-duplicate work on page items: the content analysis's judge (on the
    content thread in a crawl), then the pipeline; the penalties it announced."""

    def __init__(self, **settings: Any) -> None:
        self.crawler = get_crawler(settings_dict=settings)
        self.pipeline = NearDuplicatePipeline.from_crawler(self.crawler)
        self.judge = near_duplicate_judge(self.crawler)
        self.judge.open()
        self.detector = self.judge.detector
        self.penalties: list[tuple[str, int]] = []
        self.crawler.signals.connect(self._penalty, crawler_signals.host_penalty_changed)

    def _penalty(self, host: str, levels: int) -> None:
        self.penalties.append((host, levels))

    def process_item(self, fields: dict[str, Any]) -> PageItem:
        """The page item of ``fields``, judged as the content analysis judges a 2xx page."""
        item = PageItem(**fields)
        if 200 <= int(item.get("status", 200)) < 300:
            item.judged(self.judge.judge(
                item.get("final_url") or item["url"], item["main_text"],
                title=item.get("title") or None, noindex=bool(item.get("noindex")),
            ))
        return self.pipeline.process_item(item)  # type: ignore[no-any-return]

    def close(self) -> None:
        self.judge.close()


@pytest.fixture(scope="module")
def labelled() -> LabelledSet:
    return build_labelled_set(pages=30, variants_per_page=6, seed=5)


def test_mirror_counter_and_template_pages(labelled: LabelledSet) -> None:
    judging = Judging()
    for page in labelled.originals:  # different pages, one template per site: none flagged
        item = judging.process_item(page_item(page.url, page.html))
        assert "duplicate_of" not in item, item["url"]
        assert len(item["content_fingerprint"]) == 32
    for page in labelled.variants:
        if page.kind not in ("mirror", "chrome", "timestamp"):
            continue
        item = judging.process_item(page_item(page.url, page.html))
        original = labelled.originals[page.original or 0].url
        assert item["duplicate_of"] == original, (page.kind, page.url)
        # mirrors and re-rendered chrome (counter, date, quote) have the very same main text
        assert item["similarity"] == 1.0
    stats = judging.crawler.stats.get_stats()
    assert stats["neardup/new"] == len(labelled.originals)
    assert stats["neardup/exact"] >= 1


def test_edited_pages_are_near_duplicates(labelled: LabelledSet) -> None:
    judging = Judging()
    for page in labelled.originals:
        judging.process_item(page_item(page.url, page.html))
    edited = [p for p in labelled.variants if p.kind == "edit"]
    assert edited
    for page in edited:
        item = judging.process_item(page_item(page.url, page.html))
        assert item.get("duplicate_of") == labelled.originals[page.original or 0].url
        assert 0.5 <= item["similarity"] <= 1.0
        assert item.verdict is not None and item.verdict.kind == "near"


def test_the_pipeline_only_counts_the_verdicts_it_is_given(labelled: LabelledSet) -> None:
    """The pipeline judges nothing: an item without a verdict (another spider's, a 304, an
    error page) passes untouched and uncounted."""
    judging = Judging()
    page = labelled.originals[0]
    fields = page_item(page.url, page.html)
    plain = judging.pipeline.process_item(dict(fields))
    assert plain == fields and len(judging.detector) == 0
    item = judging.process_item(fields)
    mirror = judging.process_item(page_item("http://elsewhere.test/x", page.html))
    assert mirror["duplicate_of"] == page.url and mirror["similarity"] == 1.0
    assert item.verdict is not None and item.verdict.kind == "new"
    stats = judging.crawler.stats.get_stats()
    assert (stats["neardup/new"], stats["neardup/exact"]) == (1, 1)


def test_not_modified_errors_and_noindex(labelled: LabelledSet) -> None:
    judging = Judging()
    page = labelled.originals[1]
    item_304 = {"url": page.url, "final_url": page.url, "status": 304, "text": ""}
    assert judging.process_item(item_304) == item_304  # untouched
    assert len(judging.detector) == 0
    noindex = page_item(page.url, page.html)
    noindex["noindex"] = True
    assert "content_fingerprint" in judging.process_item(noindex)
    # a noindex page never becomes the original others are aliased to
    copy = judging.process_item(page_item("http://copy.test/1", page.html))
    assert "duplicate_of" not in copy
    # ...while an indexable page is: the first copy is the original of the next one
    again = judging.process_item(page_item("http://copy.test/2", page.html))
    assert again["duplicate_of"] == "http://copy.test/1"


def test_host_ratio_and_penalty_for_the_frontier(labelled: LabelledSet) -> None:
    judging = Judging()
    for page in labelled.originals[:6]:
        judging.process_item(page_item(page.url, page.html))
        host = page.url.split("/")[2]
        judging.process_item(page_item(page.url.replace(host, "mirror.test"), page.html))
    assert judging.detector.host_duplicate_ratio("mirror.test", 3) == 1.0
    # announced once, when mirror.test reached the minimum count: every page a duplicate
    assert judging.penalties == [("mirror.test", 2)]
    assert judging.pipeline.host_penalty("mirror.test") == 2
    assert judging.pipeline.host_penalty(labelled.originals[0].url.split("/")[2]) == 0
    assert judging.pipeline.host_penalty("unknown.test") == 0


def test_a_host_penalty_is_announced_as_it_changes() -> None:
    pipeline = NearDuplicatePipeline.from_crawler(get_crawler())
    announced: list[tuple[str, int]] = []

    def penalty(host: str, levels: int) -> None:
        announced.append((host, levels))

    pipeline.crawler.signals.connect(penalty, crawler_signals.host_penalty_changed)
    from crawler.content.analysis_neardup import Verdict

    for share in (0.0, 0.4, 0.5, 0.6, 0.8, 0.9, 0.7, 0.2):
        item = PageItem(url="http://d.test/")
        item.judged(Verdict("f" * 32, kind="near", host="d.test", host_duplicates=share))
        pipeline.process_item(item)
    assert announced == [("d.test", 1), ("d.test", 2), ("d.test", 1), ("d.test", 0)]


def test_settings_and_disabling() -> None:
    judge = Judging(NEARDUP_THRESHOLD=0.7).judge
    det = judge.detector
    assert (det.shingle_size, det.num_perm, det.threshold) == (3, 128, 0.7)
    with pytest.raises(NotConfigured):
        NearDuplicatePipeline.from_crawler(get_crawler(settings_dict={"NEARDUP_ENABLED": False}))


def test_state_survives_a_resumed_job(tmp_path: Path, labelled: LabelledSet) -> None:
    page = labelled.originals[2]
    first = Judging(JOBDIR=str(tmp_path))
    first.process_item(page_item(page.url, page.html))
    first.close()
    assert (tmp_path / "neardup.journal").exists()
    second = Judging(JOBDIR=str(tmp_path))
    item = second.process_item(page_item("http://mirror.test/p", page.html))
    assert item["duplicate_of"] == page.url
    second.close()
    third = Judging(JOBDIR=str(tmp_path))  # the journal grew by the duplicate: both known
    assert len(third.detector) == 2 and third.detector.originals == 1
    other = Judging(JOBDIR=str(tmp_path), NEARDUP_THRESHOLD=0.9)  # other settings: afresh
    assert len(other.detector) == 0


_KILLED_WORKER = """
import sys, time
from scrapy.utils.test import get_crawler
from crawler.spiders.analysis import near_duplicate_judge
from devsite.testset import build_labelled_set, page_item
from crawler.content import analysis_neardup
analysis_neardup.JOURNAL_INTERVAL = 0.2  # the module's constant, read when the judge is made
judge = near_duplicate_judge(get_crawler(settings_dict={"JOBDIR": sys.argv[1]}))
judge.open()
for page in build_labelled_set(pages=30, variants_per_page=6, seed=5).originals[:20]:
    item = page_item(page.url, page.html)
    judge.judge(item["url"], item["main_text"], title=item["title"])
time.sleep(0.3)
item = page_item("http://late.test/x", "<p>one more page to flush</p>")
judge.judge(item["url"], item["main_text"], title=item["title"])
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
    resumed = Judging(JOBDIR=str(tmp_path))
    assert resumed.detector.originals >= 20
    page = labelled.originals[3]
    item = resumed.process_item(page_item("http://mirror.test/again", page.html))
    assert item["duplicate_of"] == page.url
    resumed.close()
    assert len(Judging(JOBDIR=str(tmp_path)).detector) == len(resumed.detector)


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
    # with the content analysis's fingerprint of its main text (the judge is set when the
    # spider opens in a crawl with the pipeline).
    spider = make_spider(tmp_path, settings={"NEARDUP_ENABLED": True})
    spider.content.analysis.judge = near_duplicate_judge(spider.crawler)
    response = HtmlResponse(
        url, body=body, headers={"Content-Type": "text/html"}, request=Request(url), status=200
    )
    item = next(out for out in spider.parse(response) if isinstance(out, PageItem))
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

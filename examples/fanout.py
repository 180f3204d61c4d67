"""Fan-out with child workflows: one crawl starts a child per page and gathers them.

Each child is a workflow of its own, with its own id (derived from the parent's id and
its occurrence, so a replay finds the same children), its own retries and its own
record. The parent waits without holding a worker and resumes when the last child ends.
Run it:

    python examples/fanout.py
"""

from __future__ import annotations

import asyncio
import os
import tempfile

from pydantic import BaseModel

import durably

DSN = os.environ.get("DURABLY_DSN") or f"sqlite:///{tempfile.mkdtemp()}/fanout.db"
app = durably.App(DSN)


class Page(BaseModel):
    url: str
    words: int


class Report(BaseModel):
    pages: int
    words: int
    longest: str


@app.step(retry=durably.Retry(max_attempts=5))
async def fetch(url: str) -> str:
    # A real step would call an HTTP API; a failure here is retried with backoff, and a
    # page fetched once is never fetched again, whatever happens to the workers.
    return " ".join(["word"] * (len(url) * 7))


@app.workflow(name="summarise-page")
async def summarise_page(ctx: durably.Context, url: str) -> Page:
    text = await fetch(url)
    return Page(url=url, words=len(text.split()))


@app.workflow(name="crawl")
async def crawl(ctx: durably.Context, urls: list[str]) -> Report:
    pages = await asyncio.gather(*(ctx.child(summarise_page, url) for url in urls))
    longest = max(pages, key=lambda page: page.words)
    return Report(pages=len(pages), words=sum(page.words for page in pages), longest=longest.url)


async def main() -> None:
    serving = asyncio.create_task(app.serve(signals=False))
    try:
        urls = [f"https://example.com/docs/{'section/' * (n % 4)}{n}" for n in range(20)]
        report = await crawl.run(urls, id="crawl-1")
        print(f"{report.pages} pages, {report.words} words; longest: {report.longest}")
        again = await crawl.start(urls, id="crawl-1")  # the same id starts nothing new
        print("started again:", again.created, "result:", (await again.result()).pages)
    finally:
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
        await app.close()


if __name__ == "__main__":
    asyncio.run(main())

"""What the shipped bindings, and further profile variants, change on real papers, measured through the system
itself (a running stack: `make run`) by its API alone:

1. two services convert the corpus: `--before`, the `arxiv` preset without the shipped bindings, and
   `--after`, the `arxiv` preset as it is (with `@bindings`), both at 300 s; the comparison of the two
   (GET /api/compare/...) is the diff between them;
2. an experiment over the `--after` pair (docs/decisions/profile-experiments.md) carves the papers still not
   error-free into a sandbox and converts them under each variant, ranked by papers fixed, then broken.

It prints, paper by paper, the status before, after and under each variant with the first error or fatal
message class, the error-free counts, the comparison matrix and the ranking. Each step is skipped when it
is done already, so a second run only reads.

Run (the stack up, the corpus imported):
  CCS_URL=http://127.0.0.1:8000 CCS_TOKEN=ccs_... .venv/bin/python bench/bench_bindings.py \\
      --corpus real [--before arxiv_before] [--after arxiv_after] [--experiment after_variants] \\
      [--variants FILE.json] [--json out.json]

The default variants, each over the `--after` profile: `mathspeculate` (latexml.sty's mathparserspeculate),
`bibtex` (a paper's .bib read where it ships no .bbl) and `includestyles` (TeX Live's styles without a
binding read raw).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ERROR_FREE = ("no_problem", "warning")
FINAL = ("no_problem", "warning", "error", "fatal", "invalid", "blocked")
# latexml.sty's options in the arxiv preset (conversion/profiles.py, ARXIV_PRELOAD), and two changes of them.
GUARDS = "magnify=1.8,zoomout=1.8,tokenlimit=249999999,iflimit=3599999,absorblimit=1299999,pushbacklimit=599999"
BEFORE = {"preset": "arxiv", "paths": [], "timeout_seconds": 300}
AFTER = {"preset": "arxiv", "timeout_seconds": 300}
VARIANTS = [
    {"name": "mathspeculate", "changes": {
        "preloads": [f"[nobibtex,ids,localrawstyles,nobreakuntex,mathparserspeculate,{GUARDS}]latexml.sty"]}},
    {"name": "bibtex", "changes": {"preloads": [f"[ids,localrawstyles,nobreakuntex,{GUARDS}]latexml.sty"]}},
    {"name": "includestyles", "changes": {"includestyles": True}},
]  # fmt: skip


class Api:
    def __init__(self, url: str, token: str) -> None:
        self.client = httpx.Client(base_url=url, headers={"X-Service-Token": token}, timeout=60)

    def get(self, path: str, **params: Any) -> Any:
        response = self.client.get(path, params=params)
        response.raise_for_status()
        return response.json()

    def missing(self, path: str) -> bool:
        return self.client.get(path).status_code == 404

    def send(self, method: str, path: str, body: Any) -> Any:
        response = self.client.request(method, path, json=body)
        if response.status_code not in (200, 201, 202):
            sys.exit(f"{method} {path} answered {response.status_code}: {response.text[:500]}")
        return response.json() if response.content else None

    def documents(self, corpus: str, service: str) -> dict[str, dict]:
        rows: dict[str, dict] = {}
        while True:
            page = self.get(f"/api/corpora/{corpus}/services/{service}/documents", offset=len(rows))
            rows.update({row["document"]: row for row in page["documents"]})
            if not page["documents"] or len(rows) >= page["count"]:
                return rows


def pair_ensure(api: Api, corpus: str, service: str, profile: dict) -> None:
    """The service registered with `profile` and activated on the corpus, unless it is already."""
    if api.missing(f"/api/services/{service}"):
        api.send("POST", "/api/services", {"name": service, "profile": profile})
        print(f"registered {service}: {json.dumps(profile)}")
    if not any(s["name"] == service for s in api.get(f"/api/corpora/{corpus}")["services"]):
        api.send("POST", f"/api/corpora/{corpus}/services/{service}", {})
        print(f"activated {service} on {corpus}")


def pairs_wait(api: Api, corpus: str, services: list[str]) -> None:
    """Until every task of each pair has a result, printing how many are left."""
    while True:
        counts = {s["name"]: s["counts"] for s in api.get(f"/api/corpora/{corpus}")["services"]}
        left = {name: counts[name]["total"] - sum(counts[name][status] for status in FINAL) for name in services}
        if not any(left.values()):
            return
        lefts = ", ".join(f"{name} {n} left" for name, n in left.items())
        print(f"  {corpus}: {lefts}; load {os.getloadavg()[0]:.1f}", flush=True)
        time.sleep(30)


def experiment_wait(api: Api, name: str) -> dict:
    while True:
        detail = api.get(f"/api/experiments/{name}")
        variants = detail["variants"]
        state = detail["experiment"]["state"]
        if state in ("failed", "cancelled"):
            sys.exit(f"the experiment's job {state}: {detail['message']}")
        if state == "succeeded" and variants and all(v["done"] == v["total"] for v in variants):
            return detail
        progress = ", ".join(f"{v['name']} {v['done']}/{v['total']}" for v in variants) or detail["message"]
        print(f"  {name}: {progress}; load {os.getloadavg()[0]:.1f}", flush=True)
        time.sleep(30)


def problem(row: dict | None) -> str:
    found = (row or {}).get("problem")
    return f"{found['category']}:{found['what']}" if found else ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default=os.environ.get("CCS_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--token", default=os.environ.get("CCS_TOKEN", ""))
    parser.add_argument("--corpus", default="real")
    parser.add_argument("--before", default="arxiv_before", help="the service without the shipped bindings")
    parser.add_argument("--after", default="arxiv_after", help="the service with them: the experiment's pair")
    parser.add_argument("--experiment", default="after_variants", help="the experiment's name")
    parser.add_argument("--variants", type=Path, help="a JSON list of {name, changes} (default: three)")
    parser.add_argument("--json", type=Path, help="write the outcome here")
    args = parser.parse_args()
    if not args.token:
        sys.exit("a token is needed: --token or CCS_TOKEN (make run prints one on its first start)")
    api = Api(args.url, args.token)
    variants = json.loads(args.variants.read_text()) if args.variants else VARIANTS

    started = time.monotonic()
    pair_ensure(api, args.corpus, args.before, BEFORE)
    pair_ensure(api, args.corpus, args.after, AFTER)
    pairs_wait(api, args.corpus, [args.before, args.after])
    print(f"both services converted {args.corpus} ({time.monotonic() - started:.0f} s here)")
    if api.missing(f"/api/experiments/{args.experiment}"):
        body = {"corpus": args.corpus, "service": args.after, "name": args.experiment, "variants": variants}
        api.send("POST", "/api/experiments", body)
        print(f"started experiment {args.experiment}: {', '.join(v['name'] for v in variants)}")
    detail = experiment_wait(api, args.experiment)
    print(f"the experiment ended ({time.monotonic() - started:.0f} s here)")

    before = api.documents(args.corpus, args.before)
    after = api.documents(args.corpus, args.after)
    ranked = sorted(detail["variants"], key=lambda v: v["rank"])
    sandbox = detail["experiment"]["sandbox"]
    under = {v["name"]: api.documents(sandbox, v["service"]) for v in ranked}
    heads = " ".join(f"{v['name'][:14]:14s}" for v in ranked)
    print(f"\n{'paper':40s} {'before':10s} {'after':10s} {heads}  first problem after")
    papers = []
    for name in sorted(before):
        variant = {v["name"]: under[v["name"]].get(name, after[name])["status"] for v in ranked}
        cells = " ".join(f"{variant[v['name']]:14s}" for v in ranked)
        print(
            f"{name[:40]:40s} {before[name]['status']:10s} {after[name]['status']:10s} {cells}  {problem(after[name])}"
        )
        papers.append({
            "paper": name, "before": before[name]["status"], "before_problem": problem(before[name]),
            "after": after[name]["status"], "after_problem": problem(after[name]), "variants": variant,
        })  # fmt: skip
    free = {key: sum(1 for p in papers if p[key] in ERROR_FREE) for key in ("before", "after")}
    print(f"\nerror-free of {len(papers)}: {free['before']} before, {free['after']} after")
    matrix = api.get(f"/api/compare/{args.corpus}/{args.before}/{args.after}")
    print(f"comparison {args.before} x {args.after}: {json.dumps(matrix.get('matrix', matrix))[:1500]}")
    print("\nrank  variant          fixed  broken  (over the papers not error-free after)")
    for v in ranked:
        fixed = ", ".join(paper["name"] for paper in v["fixed_papers"])
        print(f"{v['rank']:4d}  {v['name']:16s} {v['fixed']:5d} {v['broken']:7d}  fixed: {fixed}")
    if args.json:
        args.json.write_text(json.dumps({"ranking": ranked, "papers": papers, "comparison": matrix}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""bench/corpus_sweep.py's --scrub: a record to commit keeps counts and names, never text from the corpus."""
from __future__ import annotations

import importlib.util
from pathlib import Path

spec = importlib.util.spec_from_file_location("corpus_sweep", Path(__file__).resolve().parents[1] / "bench" /
                                              "corpus_sweep.py")
corpus_sweep = importlib.util.module_from_spec(spec)
spec.loader.exec_module(corpus_sweep)


def test_scrub_keeps_counts_and_names_and_drops_quoted_text():
    report = {"command": "bench/corpus_sweep.py --suite s=/home/me/corpus/src --jobs 2 --out /tmp/o",
              "suites": {"s": {"apps": [
                  {"app": "appA", "complete": 3, "error": ["x.cu:13: use of undeclared identifier 'SECRET_NAME'"],
                   "cannot_reasons": [], "files_not_understood": ["k.cu: unknown type name 'my_t'", "b.cu: ..."],
                   "run_err": ["the original kernel fails: trap"], "todo_kinds": ["runtime"]}]}}}
    out = corpus_sweep.scrubbed(report)
    rec = out["suites"]["s"]["apps"][0]
    assert rec["app"] == "appA" and rec["complete"] == 3 and rec["todo_kinds"] == ["runtime"]
    assert rec["files_not_understood"] == "(left out: quotes the fetched code; 2 item(s))"
    assert rec["cannot_reasons"] == []
    assert "SECRET_NAME" not in str(out) and "my_t" not in str(out) and "trap" not in str(out)
    assert out["command"] == "bench/corpus_sweep.py --suite s=CORPUS/s --jobs 2 --out OUT"
    assert "SECRET_NAME" in str(report)                  # the caller's report is left as it was

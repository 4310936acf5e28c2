"""Print a batch report's summary and where the outputs are (the end of `make run`)."""

import json
import pathlib
import sys

data, ds = pathlib.Path(sys.argv[1]), sys.argv[2]
rep_path = data / "reports" / ds / "batch_report.json"
if not rep_path.is_file():
    sys.exit(f"no batch report at {rep_path}: the run did not reach batch_report (see airflow_home/last_run.log)")
rep = json.loads(rep_path.read_text())
print()
print(f"docverify batch {ds}: {rep['documents']} document(s)")
print("  final routes: " + ", ".join(f"{k}={v}" for k, v in rep["final_routes"].items()))
print("  V5 rules:     " + ", ".join(f"{k}={v}" for k, v in rep["rules"].items()))
print(f"  errors:       {len(rep['errors'])}" + "".join(f"\n    {e['doc_id']}: {e['error']}" for e in rep["errors"]))
audit = rep.get("audit") or {}
if audit.get("sample"):
    fa = audit.get("false_accept_overall") or {}
    rate = "no audit answered yet" if fa.get("rate") is None else (
        f"{100 * fa['rate']:.1f} % (95 % CI {100 * fa['ci95_low']:.1f}–{100 * fa['ci95_high']:.1f} %, n={fa['n']})")
    print(f"  audit:        {len(audit['sample'])} of {audit.get('accepted', 0)} accepted drawn for an SME audit "
          f"({', '.join(audit['sample'])}); false-accept rate so far: {rate}")
llm = rep["llm"]
cost = "n/a" if llm.get("cost_usd") is None else f"${llm['cost_usd']:.4f}"
print(f"  LLM calls:    {llm['calls']} (cache hits {llm['cache_hits']}, estimated cost {cost}; "
      f"implementations: {', '.join(rep['implementations'])})")
print()
for d in rep["per_document"]:
    why = f"error {d['error']}" if d.get("error") and d.get("rule") is None else f"rule {d.get('rule', '')}"
    print(f"  {d['doc_id']:<34} {d.get('route', ''):<18} {d['final_decision']:<16} {why}")
print()
print(f"report:      {data / 'reports' / ds / 'batch_report.html'} (also .md, .json)")
print(f"accepted:    {data / 'accepted' / ds}/")
print(f"SME packets: {data / 'sme_packets'}/")
print(f"per-document artifacts: {data / 'runs' / ds}/<doc_id>/")

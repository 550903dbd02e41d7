"""The ranked kernel table that `mepgen extract` and `mepgen list` print."""
from __future__ import annotations


def kernel_rows(inventory: dict) -> list[dict]:
    rows = []
    for k in sorted(inventory["kernels"], key=lambda k: k["rank"]):
        rows.append({
            "rank": k["rank"], "kernel": k["qualified_name"], "id": k["id"], "share": k["share"],
            "score": k["score"], "location": f"{k['file']}:{k['start_line']}",
            "launch_sites": len(k["launch_sites"]),
            "in_loop": sum(1 for s in k["launch_sites"] if s["in_loop"]),
            "params": len(k["params"]),
            "instantiations": ["<" + ", ".join(i) + ">" for i in k.get("instantiations", [])],
        })
    return rows


def kernel_table(inventory: dict) -> str:
    rows = kernel_rows(inventory)
    header = ["#", "kernel", "share", "launches (in loop)", "location"]
    body = [[str(r["rank"]), r["kernel"] + ("".join(r["instantiations"][:1]) if r["instantiations"] else ""),
             f"{100 * r['share']:.1f}%", f"{r['launch_sites']} ({r['in_loop']})", r["location"]] for r in rows]
    widths = [max(len(x) for x in col) for col in zip(header, *body)]
    fmt = lambda cells: "  ".join(c.ljust(w) if i in (1, 4) else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([fmt(header), fmt(["-" * w for w in widths]), *map(fmt, body)])

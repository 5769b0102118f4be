#!/usr/bin/env python3
"""Writes a deterministic site of N pages of 50-100 KB each for the crawl benchmark.

Page i links to pages 3i+1..3i+3 (so every page is reachable), to 20 other pages chosen
at random, and has navigation, prose, lists, a table and a code block like a documentation
page.
"""
import os
import random
import sys

def href(j: int) -> str:
    return "/" if j == 0 else f"/p/{j}.html"


def main() -> None:
    out, n = sys.argv[1], int(sys.argv[2])
    rng = random.Random(42)
    words = ("crawler markdown extract page link sitemap robots queue worker lambda table "
             "code async cancel result tree depth limit fetch guard tenant job status").split()
    os.makedirs(os.path.join(out, "p"), exist_ok=True)
    for i in range(n):
        children = [c for c in range(3 * i + 1, 3 * i + 4) if c < n]
        others = rng.sample(range(n), 20)
        nav = "".join(f'<li><a href="{href(j)}">Section {j}</a></li>' for j in range(12))
        links = "".join(f'<li><a href="{href(c)}">Child {c}</a></li>' for c in children)
        links += "".join(f'<a href="{href(o)}">see {o}</a> ' for o in others)
        target = rng.randint(50_000, 100_000)
        parts = [f"<!doctype html><html lang=en><head><title>Page {i}</title>"
                 f'<meta name="description" content="Benchmark page {i}">'
                 "<style>body{font-family:sans-serif}</style></head><body>"
                 f"<header><nav><ul>{nav}</ul></nav></header><main><h1>Page {i}</h1>"
                 f"<ul>{links}</ul>"]
        size = sum(map(len, parts))
        k = 0
        while size < target:
            k += 1
            para = " ".join(rng.choice(words) for _ in range(120))
            block = (f"<h2>Part {k}</h2><p>{para} <strong>{rng.choice(words)}</strong> "
                     f'<a href="{href(rng.randrange(n))}#s{k}">ref</a>.</p>')
            if k % 3 == 0:
                rows = "".join(f"<tr><td>{rng.choice(words)}</td><td>{rng.randint(0, 999)}</td></tr>"
                               for _ in range(8))
                block += f"<table><tr><th>Key</th><th>Value</th></tr>{rows}</table>"
            if k % 4 == 0:
                block += "<pre><code class=\"language-rust\">fn main() {\n    println!(\"hi\");\n}</code></pre>"
            parts.append(block)
            size += len(block)
        parts.append("</main><footer>Footer</footer><script>var x = 1;</script></body></html>")
        path = os.path.join(out, "index.html" if i == 0 else f"p/{i}.html")
        with open(path, "w") as f:
            f.write("".join(parts))

if __name__ == "__main__":
    main()

"""`mepgen report`: one self-contained HTML page per `mepgen optimize` run or batch, read from the files the other
stages write (.mepgen/runs/, .mepgen/batches/, .mepgen/patches/, .mepgen/tune/report.json); plots drawn offline
with matplotlib and embedded as inline SVG."""

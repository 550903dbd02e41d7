"""Stage 4, `mepgen optimize`: search for the fastest verified variant of an MEP's kernel."""

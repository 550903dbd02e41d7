"""Stage 5, `mepgen patch`: put a verified kernel variant back into the application, reviewable and reversible."""

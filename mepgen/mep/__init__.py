"""The `mepgen mep` stage: a kernel of the inventory -> a Minimal Executable Program (docs/mep-format.md)."""
